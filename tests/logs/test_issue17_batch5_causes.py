"""The causes batch 5 exposed (issue 17, helper judge6), each rule with a real excerpt (tests/fixtures/oos-batch5,
sources in its INDEX.tsv) and a look-alike that must not take the rule's kind."""

from __future__ import annotations

import pytest

from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_megatron import parse_iterations
from analysis.logs.read_log import read_log


@pytest.mark.parametrize("text", [
    # DeepSpeed#4907: the launcher's passwordless-ssh check of the hostfile's master host
    "subprocess.CalledProcessError: Command 'ssh -o PasswordAuthentication=no 192.168.3.100 hostname' returned "
    "non-zero exit status 255.\n",
    # FlagScale on Hygon DCU: gradient_accumulation_fusion without APEX's extension
    "RuntimeError: ColumnParallelLinear was called with gradient_accumulation_fusion set to True but the custom CUDA "
    "extension fused_weight_gradient_mlp_cuda module is not found. To use gradient_accumulation_fusion you must "
    "install APEX with --cpp_ext and --cuda_ext.\n",
    # DeepSpeed cpu_adam JIT build, cut before the CalledProcessError line
    "FAILED: cpu_adam.o\nninja: build stopped: subcommand failed.\n",
    # NeMo Parakeet fine-tune: lightning vs pytorch_lightning classes
    "TypeError: `model` must be a `LightningModule` or `torch._dynamo.OptimizedModule`, got `EncDecCTCModelBPE`\n",
    # NeMo HiFi-GAN fine-tune: Hydra instantiating a dataset whose manifest is missing
    "Error executing job with overrides: []\nError in call to target 'nemo.collections.tts.torch.data.VocoderDataset':"
    "\nFileNotFoundError(2, 'No such file or directory')\n",
    # DeepSpeed#5071: a uniform pipeline partition leaves a stage without trainable parameters
    "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\nValueError: optimizer got an "
    "empty parameter list\n",
    # DeepSpeed ZeRO++ qwZ constraint
    "AssertionError: Qantized weight requires the number of weights be a multiple of 8\n",
])
def test_environment_and_build_failures_are_configuration_errors(text):
    assert trial_outcome(text).failure_kind == "config_error"


@pytest.mark.parametrize("text, kind", [
    ("subprocess.CalledProcessError: Command '['python', 'eval.py']' returned non-zero exit status 255.\n",
     "crashed"),  # not the ssh check
    ("RuntimeError: CUDA error: an illegal memory access was encountered\nError in call to target 'm.Model':\n",
     "crashed"),  # a CUDA fault wins over the Hydra wrapper that reports it
    ("KeyError: 'the key layer.3 was not found'\n", "crashed"),  # a missing key, not a missing extension
    ("ninja: no work to do.\n", "unknown"),  # ninja's successful no-op
])
def test_configuration_look_alikes(text, kind):
    assert trial_outcome(text).failure_kind == kind


def test_a_py_spy_dump_of_the_stuck_job_is_a_hang():
    # DeepSpeed#1522: the main thread stuck in the ZeRO grad-norm step, dumped with py-spy
    text = ('Thread 1084205 (active): "MainThread"\n    all_reduce (torch/distributed/distributed_c10d.py:1185)\n'
            "    _exec_schedule (deepspeed/runtime/pipe/engine.py:1335)\n    <module> (pretrain_gpt.py:237)\n")
    assert trial_outcome(text).failure_kind == "hang"


def test_a_faulthandler_dump_after_a_fatal_signal_is_a_crash_not_a_hang():
    # t5x (batch 5 other/t5x_sigsegv_after_saving_checkpoint_1.log): faulthandler's dump printed by SIGSEGV
    text = ("Fatal Python error: Segmentation fault\n\nThread 0x00007f4a25687c40 (most recent call first):\n"
            '  File "/usr/lib/python3.8/threading.py", line 306 in wait\n')
    assert trial_outcome(text).failure_kind == "crashed"
    dumped = "Timeout (0:30:00)!\n" + text.split("\n\n", 1)[1]
    assert trial_outcome(dumped).failure_kind == "hang"


def test_a_log_ending_while_dataset_indices_are_built_is_a_hang():
    # GPT-NeoX (batch 5 megatron_deepspeed/neox_240_data_paths_hang_after_blendable_index_1.log)
    text = ("> building indices for blendable datasets ...\n"
            " > RANK 1 elapsed time for building blendable dataset indices: 0.33 (sec)\n")
    assert trial_outcome(text).failure_kind == "hang"
    assert trial_outcome(text + "Traceback (most recent call last):\nKeyError: 'x'\n").failure_kind == "crashed"


@pytest.mark.parametrize("text", [
    "2020-09-10 11:52:14,449 (base_trainer:831) INFO: (Step: 95400) train_mel_loss_before = nan.\n",  # TensorFlowTTS
    '  File "/content/TTS/TTS/tts/layers/losses.py", line 398, in forward\n'
    '    raise RuntimeError(f" [!] NaN loss with {key}.")\n',  # Mozilla TTS's NaN check in its traceback
])
def test_a_nan_in_a_loss_field_or_a_nan_check_is_diverged(text):
    assert trial_outcome(text).failure_kind == "diverged"


@pytest.mark.parametrize("text", [
    "INFO: (Step: 100) train_mel_loss_before = 0.412.\n",
    "INFO: lossless compression = nan\n",  # not a loss field
])
def test_loss_field_look_alikes(text):
    assert trial_outcome(text).failure_kind != "diverged"


def test_a_loss_of_exactly_zero_after_a_positive_loss_is_diverged():
    # DeepSpeed#5059 (ZeRO++ hpZ): HF Trainer records with 'loss': 0.0 from step 3 on
    records = [f"{{'loss': {loss}, 'learning_rate': 2e-05, 'epoch': 0.0, 'global_step': {k + 1}}}"
               for k, loss in enumerate((2.1364, 2.0157, 0.0))]
    assert trial_outcome("\n".join(records) + "\n").failure_kind == "diverged"
    healthy = "\n".join(records[:2] + [records[2].replace("0.0,", "1.9,", 1)]) + "\n"
    assert trial_outcome(healthy).failure_kind != "diverged"


def test_a_step_record_without_an_iteration_counter_is_read():
    # Megatron-LLaMA#27: the record without the `iteration N/M |` prefix
    text = "elapsed time per iteration (ms): 64638.7 | average overall token/sec : 64888.4 | average token/sec/GPU " \
           ": 2027.8\n"
    iterations = parse_iterations(text)
    assert [round(it.step_time_s, 4) for it in iterations] == [64.6387]
    assert trial_outcome(text).failure_kind == "ok"
    assert parse_iterations("the elapsed time per iteration (ms) is printed below\n") == []


def test_a_record_wrapped_right_after_a_closing_pipe_is_joined():
    # Megatron-Bridge PR 841: the paste wraps each record at a fixed width, the first line ending at a '|'
    text = (" [2025-10-02 22:52:07] iteration       10/      50 | consumed samples:         5120 |\n"
            "elapsed time per iteration (ms): 13212.7 | learning rate: 3.000000E-04 | global batch\n"
            "size:   512 | lm loss: 4.474437E+00 | loss scale: 1.0 |\n"
            " [2025-10-02 22:54:30] iteration       20/      50 | consumed samples:        10240 |\n"
            "elapsed time per iteration (ms): 14260.3 | learning rate: 2.604594E-04 | global batch\n"
            "size:   512 | lm loss: 8.797448E-02 | loss scale: 1.0 |\n")
    assert [round(it.step_time_s, 4) for it in read_log(text).iterations] == [13.2127, 14.2603]
    # a closed record followed by a memory report stays one line
    closed = (" iteration 10/ 50 | elapsed time per iteration (ms): 100.0 | lm loss: 2.0 |\n"
              "[Rank 0] (after 10 iterations) memory (MB) | allocated: 100.0 |\n")
    assert [it.step_time_s for it in read_log(closed).iterations] == [0.1]


def test_a_checkpoint_key_mismatch_without_its_exception_line_is_a_crash():
    # Megatron-LM#900 (batch 5 megatron_lm/converted_ckpt_unexpected_extra_state_key_1.log)
    text = 'Unexpected key(s) in state_dict: "decoder.layers.0.self_attention.core_attention._extra_state"\n'
    assert trial_outcome(text).failure_kind == "crashed"
    assert trial_outcome("loaded state_dict: 0 missing keys, 0 unexpected keys\n").failure_kind == "unknown"


@pytest.mark.parametrize("text", [
    "!!!!!!! Segfault encountered !!!!!!!\n  File \"<unknown>\", line 0, in crc32_16bytes\n",  # Megatron-Bridge GB200
    "Memory access fault by GPU node-2 (Agent handle: 0x55d1) on address 0x7f00. Reason: Page not present or "
    "supervisor privilege.\n",  # ROCm 5.4, batch 5 megatron_deepspeed/amd_rocm54_memory_access_fault_first_barrier
])
def test_native_faults_in_other_wordings_are_crashes(text):
    assert trial_outcome(text).failure_kind == "crashed"


def test_ctrl_c_echo_running_into_the_launchers_record_after_a_stall_is_a_hang():
    # accelerate#2724 (batch 5 deepspeed/peft_zero3_stuck_after_checkpoint_ctrl_c_1.log)
    stuck = ("[INFO|trainer.py:2915] 2024-05-26 14:56:22,776 >> Saving model checkpoint to ../output/ckpt\n"
             "Invalidate trace cache @ step 0: expected module 0, but got module 274\n")
    tail = ("^C[2024-05-26 15:06:40,046] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 22523\n"
            "Traceback (most recent call last):\n  File \"/opt/conda/bin/deepspeed\", line 6, in <module>\n"
            "KeyboardInterrupt\n")
    assert trial_outcome(stuck + tail).failure_kind == "hang"
    # '^C' inside a line is not the terminal's echo
    assert trial_outcome(stuck + "value ^C[x] printed\nTraceback (most recent call last):\nKeyError: 'x'\n"
                         ).failure_kind == "crashed"


def test_sbatch_refusing_the_submission_is_submit_refused():
    # NeMo-RL (batch 5 slurm/nemo_rl_dapo_perf_test_time_limit_invalid_submit_1.log)
    text = "sbatch: error: Batch job submission failed: Requested time limit is invalid (missing or exceeds some limit)\n"
    assert trial_outcome(text).failure_kind == "submit_refused"
    assert trial_outcome("Submitted batch job 4242\n").failure_kind != "submit_refused"


def test_a_c10d_rendezvous_connection_error_inside_the_error_handler_record_is_comm_error():
    # pytorch (batch 5 pytorch/elastic_pipeline_resnet50_c10d_rendezvous_connection_error_1.log), shortened
    text = ('[ERROR] 2021-09-13 22:18:26,678 error_handler: {"message": {"message": "RendezvousConnectionError: The '
            'connection to the C10d store has failed. See inner exception for details.", "extraInfo": {}}}\n')
    assert trial_outcome(text).failure_kind == "comm_error"


@pytest.mark.parametrize("text, kind", [
    # the family beyond batch 5's lines (written in the loader's, CUDA's and pdsh's wordings)
    ("ImportError: /env/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined "
     "symbol: _ZN3c104cuda9SetDeviceEi\n", "config_error"),
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device\n", "config_error"),
    ("pdsh@node1: node2: ssh exited with exit code 255\n", "config_error"),
    ("OSError: libcudart.so.11.0: cannot open shared object file: No such file or directory\n", "config_error"),
    # look-alikes: a symbol in a Python message, CUDA_HOME merely printed
    ("NameError: undefined symbol: foo is not defined\n", "crashed"),
    ("CUDA_HOME=/usr/local/cuda\nTraceback (most recent call last):\nKeyError: 'x'\n", "crashed"),
])
def test_incompatible_binaries_and_launcher_checks(text, kind):
    assert trial_outcome(text).failure_kind == kind


@pytest.mark.parametrize("warning", [
    "WARNING: apex is not installed, using torch's native LayerNorm",
    "FlashAttention2 is not installed; falling back to the eager attention implementation",
    "xformers is not available, skipping memory-efficient attention",
])
def test_a_missing_optional_package_warning_does_not_explain_a_later_crash(warning):
    text = f"{warning}\nTraceback (most recent call last):\n  File \"train.py\", line 3\nKeyError: 'labels'\n"
    assert trial_outcome(text).failure_kind == "crashed"
