"""Issue 17, batch 11 (helper judge11a), the error side: assertion spellings that state a requirement, meta-tensor
messages as crashes, a report's quoting around an error line, and a traceback cut before its exception line judged by
its innermost frames (families.frames). Each rule: a real excerpt (its source), a made-up look-alike, and lines that
must not match."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from analysis.logs.families import config, error_end, frames

# ---- assertion spellings whose message states a requirement (families.config.ASSERT_SPELLING, error_end)

# deepspeedai/DeepSpeed#4386 (tests/fixtures/oos-batch11/deepspeed/zeropp_hpz_3x8_gpus_quantized_weight_multiple_of_8_
# assert_1.log)
_ZEROPP = "AssertError: Quantized weight requires the number of weights to be a multiple of 8"


@pytest.mark.parametrize("text", [
    _ZEROPP + "\n",
    "[rank3]: AssertError: micro batch size 3 must be divisible by data parallel size 2\n",  # made up
    "loading\nAssertion failed: tensor parallel size 8 must divide the number of attention heads 12\n",  # made up
])
def test_an_assertion_in_another_spelling_that_states_a_requirement_is_a_config_error(text):
    assert classify(text).kind == "config_error"


@pytest.mark.parametrize(("text", "why"), [
    ("loading\nAssertError: the sampler ran dry\n", "crashed:"),  # no requirement: a crash
    ("loading\nAssertion failed: x > 0\n", "failure statement"),  # a bare condition
    ("loading\nAssertion failed: n > 0, file sampler.c, line 42\n", "failure statement"),  # MSVC's own line
])
def test_an_assertion_that_states_no_requirement_stays_a_crash(text, why):
    failure = classify(text)
    assert failure.kind == "crashed" and why in failure.reason


def test_assertion_spellings_are_judged_as_an_assertion_error():
    assert config.is_config_message("AssertError", "requires the number of weights to be a multiple of 8")
    assert config.is_config_message("assertion_error", "world size must be divisible by tp size")
    assert not config.is_config_message("AssertError", "the sampler ran dry")
    assert error_end.as_exception("Assertion failed: tp must divide heads") == "AssertionError: tp must divide heads"
    assert error_end.as_exception("Assertion failed: n > 0, file sampler.c, line 42") is None


@pytest.mark.parametrize(("exc_type", "message", "expected"), [
    ("AssertError", "Quantized weight requires the number of weights to be a multiple of 8", True),  # DeepSpeed#4386
    ("AssertionError", "padded length 1001 is not divisible by 8", True),  # made up: no named quantity
    ("ValueError", "the shard count must be a multiple of 4", True),  # made up
    ("RuntimeError", "input height 1001 is not divisible by 8", False),  # a kernel's own tensors
    ("AssertionError", "the chunk was divided twice", False),
    ("KeyError", "'not divisible by 8'", False),
])
def test_a_divisibility_requirement_of_an_assertion_or_value_check_is_a_configuration_rule(exc_type, message,
                                                                                          expected):
    assert config.is_config_message(exc_type, message) is expected


# ---- a meta tensor is the program's state, not a setting (families.config.PROGRAM_STATE)

# hiyouga/LlamaFactory#7750 (tests/fixtures/oos-batch11/deepspeed/llamafactory_pissa_qwen32b_zero3_offload_meta_
# tensor_1.log): torch's hint "Please use ... to_empty()" had read as a configuration directive
_PISSA = ("NotImplementedError: Cannot copy out of meta tensor; no data! Please use torch.nn.Module.to_empty() "
          "instead of torch.nn.Module.to() when moving module from meta to a different device.")
# modelscope/ms-swift#9345 (tests/fixtures/oos-batch11/deepspeed/swift_zero3_init_cannot_copy_out_of_meta_tensor_1.log)
_SWIFT = "`RuntimeError: Cannot copy out of meta tensor; no data!`"


@pytest.mark.parametrize("text", [
    _PISSA + "\n",
    _SWIFT + "\n",
    "Traceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n    m.item()\n"
    "RuntimeError: Tensor.item() cannot be called on meta tensors; the model must be materialized first\n",  # made up
    "ValueError: parameter lm_head.weight is on the meta device; the config must set low_cpu_mem_usage\n",  # made up
])
def test_a_meta_tensor_error_is_a_crash_whatever_its_words_relate(text):
    failure = classify(text)
    assert failure.kind == "crashed", failure.reason


@pytest.mark.parametrize("message", [
    "Please use --bf16 instead of --fp16 with this model",
    "the metadata of the checkpoint must match the tensor parallel size",  # "metadata", not meta tensors
])
def test_messages_that_do_not_name_a_meta_tensor_keep_their_config_reading(message):
    assert config.is_config_message("ValueError", message)
    assert config.PROGRAM_STATE.search(message) is None


# ---- a report's quoting around an error line (families.error_end.unquoted)

# deepspeedai/DeepSpeed#5696 (tests/fixtures/oos-batch11/deepspeed/internlm_pipeline_pp8_hidden_states_shape_mismatch_
# 1.log): the excerpt cuts the quoted line inside its backticks
_INTERNLM = "stage=1 layers=7\n    14: InternLMBlockPipeLayer\n......\n`RuntimeError: Mism\n"


@pytest.mark.parametrize(("line", "expected"), [
    ("`RuntimeError: Mism", "RuntimeError: Mism"),
    ("`RuntimeError: x failed`", "RuntimeError: x failed"),
    ("```ValueError: bad value```", "ValueError: bad value"),
    ('"ValueError: bad value"', "ValueError: bad value"),
    ("> AssertionError: stage mismatch", "AssertionError: stage mismatch"),
])
def test_a_quoted_error_line_is_read_without_its_quoting(line, expected):
    assert error_end.unquoted(line) == expected


@pytest.mark.parametrize("line", [
    "'DeepSpeedEngine' object has no attribute 'text_model'",  # Python's own quote opens the line
    "a > b", "> /work/train.py(12)step()", ">>> import torch", "plain text", "```",
])
def test_lines_that_are_not_quoted_stay_as_they_are(line):
    assert error_end.unquoted(line) == line


def test_a_quoted_exception_line_cut_inside_its_quote_is_a_crash():
    failure = classify(_INTERNLM)
    assert failure.kind == "crashed" and "RuntimeError: Mism" in failure.reason


@pytest.mark.parametrize("line", [
    # made up in the shapes of the pipeline engine's p2p receive and autograd's check (DeepSpeed#5696's family)
    "`RuntimeError: Mismatch in shape: grad_output[0] has a shape of torch.Size([8, 2048, 4096]) and output[0] has "
    "a shape of torch.Size([8, 1024, 4096]).`",
    "> RuntimeError: received hidden states of shape [1024, 1, 4096] from the previous stage, expected [2048, 1, 4096]",
])
def test_a_tensor_shape_mismatch_between_stages_is_a_crash(line):
    assert classify(f"stage=1 layers=7\n{line}\n").kind == "crashed"


# ---- a traceback cut before its exception line, judged by its innermost frames (families.frames)

# baichuan-inc/Baichuan2#113 (tests/fixtures/oos-batch11/deepspeed/baichuan2_13b_full_ft_a100_deepspeed_initialize_oom_
# cut_1.log, shortened): a driver's logger prints the frames, flattened, behind two timestamps and its tags
_BAICHUAN = "".join(
    f"2023-09-14 21:27:58\t2023-09-14 21:27:58.000 [INFO] [Driver] {line}\n" for line in (
        'File "/opt/conda/lib/python3.8/site-packages/deepspeed/__init__.py", line 171, in initialize',
        "engine = DeepSpeedEngine(args=args,",
        'File "/opt/conda/lib/python3.8/site-packages/deepspeed/runtime/engine.py", line 1209, in _configure_optimizer',
        "self.optimizer = self._configure_zero_optimizer(basic_optimizer)",
        'File "/opt/conda/lib/python3.8/site-packages/deepspeed/runtime/engine.py", line 1505, in '
        "_configure_zero_optimizer",
        "optimizer = DeepSpeedZeroOptimizer_Stage3("))
# huggingface/transformers#24658 (tests/fixtures/oos-batch11/deepspeed/hf_trainer_zero3_offload_notebook_configure_
# zero_optimizer_oom_cut_1.log, shortened): IPython's rendering
_NOTEBOOK = (
    "File /home/pc/miniconda3/envs/Transformers/lib/python3.11/site-packages/deepspeed/runtime/engine.py:1474, in "
    "DeepSpeedEngine._configure_zero_optimizer(self, optimizer)\n"
    "   1473         from deepspeed.runtime.zero.stage3 import DeepSpeedZeroOptimizer_Stage3\n"
    "-> 1474         optimizer = DeepSpeedZeroOptimizer_Stage3(\n"
    "   1475             self.module,\n"
    "   1476             optimizer,\n")
# LianjiaTech/BELLE#542 (tests/fixtures/oos-batch11/hf_trainer/belle_pretrain_grouping_texts_barrier_socket_timeout_
# cut_1.log, shortened)
_BELLE = (
    "Grouping texts in chunks of 1024:  29%|##9       | 3362000/11407235 [10:03:35<25:22:33, 88.07 examples/s]"
    "Traceback (most recent call last):\n"
    '  File "src/entry_point/pt_train.py", line 317, in main\n'
    "    with torch_distributed_zero_first(global_rank):\n"
    '  File "/env/lib/python3.8/site-packages/transformers/trainer_pt_utils.py", line 251, in '
    "torch_distributed_zero_first\n"
    "    dist.barrier()\n"
    '  File "/env/lib/python3.8/site-packages/torch/distributed/distributed_c10d.py", line 3328, in barrier\n')
# bigcode-project/Megatron-LM#61 (tests/fixtures/oos-batch11/megatron_lm/bigcode_starcoder_pretrain_fused_softmax_
# kernel_build_error_cut_1.log, shortened)
_BIGCODE = (
    "Traceback (most recent call last):\n"
    '  File "/tmp/Megatron/megatron/fused_kernels/cuda/__init__.py", line 70, in load\n'
    "    scaled_upper_triang_masked_softmax_cuda = _cpp_extention_load_helper(\n"
    '  File "/tmp/Megatron/megatron/fused_kernels/cuda/__init__.py", line 42, in _cpp_extention_load_helper\n'
    "    return cpp_extension.load(\n")
# modelscope/ms-swift Megatron on an NPU (tests/fixtures/oos-batch11/megatron_lm/swift_megatron_npu_mindspeed_import_
# transformer_engine_load_cudnn_cut_1.log, shortened)
_SWIFT_TE = (
    '  File "/env/lib/python3.10/importlib/__init__.py", line 126, in import_module\n'
    "    return _bootstrap._gcd_import(name[level:], package, level)\n"
    '  File "/env/lib/python3.10/site-packages/transformer_engine/__init__.py", line 11, in <module>\n'
    "    import transformer_engine.common\n"
    '  File "/env/lib/python3.10/site-packages/transformer_engine/common/__init__.py", line 304, in <module>\n'
    "    _CUDNN_LIB_CTYPES = _load_cudnn()\n"
    '  File "/env/lib/python3.10/site-packages/transformer_engine/common/__init__.py", line 250, in _load_cudnn\n'
    "    libs = subprocess.check_output(\n"
    '  File "/env/lib/python3.10/subprocess.py", line 420, in check_output\n'
    "    return run(*popenargs, stdout=PIPE, timeout=timeout, check=True,\n")

# arxyzan/data2vec-pytorch#17 (tests/fixtures/oos-batch11/other/data2vec_text_trainer_config_missing_key_cut_1.log,
# shortened): OmegaConf's raise path, five frames out (it re-raises with the failed lookup's frames inside it)
_OMEGACONF = "C:\\Users\\User\\anaconda3\\lib\\site-packages\\omegaconf\\"
_DATA2VEC = "".join(f'  File "{_OMEGACONF}{where}\n    {code}\n' for where, code in (
    ("base.py\", line 231, in _format_and_raise", "format_and_raise("),
    ("_utils.py\", line 899, in format_and_raise", "_raise(ex, cause)"),
    ("_utils.py\", line 797, in _raise", "raise ex.with_traceback(sys.exc_info()[2])  # set env var OC_CAUSE=1"),
    ("dictconfig.py\", line 351, in __getattr__", "return self._get_impl("),
    ("dictconfig.py\", line 442, in _get_impl", "node = self._get_child("),
    ("basecontainer.py\", line 73, in _get_child", "child = self._get_node(")))


@pytest.mark.parametrize(("text", "kind"), [
    (_DATA2VEC, "config_error"),
    (_BAICHUAN, "oom"), (_NOTEBOOK, "oom"), (_BELLE, "comm_error"), (_BIGCODE, "config_error"),
    (_SWIFT_TE, "config_error"),
    # made up, in other renderings: rich's box, rank prefixes, Ray's worker prefix
    ("│ /env/site-packages/deepspeed/runtime/zero/stage3.py:310 in __init__                 │\n"
     "│ ❱  310 │   │   self._create_fp32_partitions()                                    │\n"
     "│ /env/site-packages/deepspeed/runtime/zero/stage3.py:880 in _create_fp32_partitions  │\n"
     "│ ❱  880 │   │   self.fp32_partitioned_groups_flat.append(p.clone().float())       │\n", "oom"),
    ('[rank2]:   File "/env/site-packages/torch/distributed/distributed_c10d.py", line 4120, in monitored_barrier\n'
     "[rank2]:     return group_to_use.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)\n", "comm_error"),
    ("(Worker pid=4242, ip=10.0.0.7)   File \"/env/site-packages/torch/distributed/rendezvous.py\", line 98, in "
     "_tcp_rendezvous_handler\n(Worker pid=4242, ip=10.0.0.7)     store = _create_c10d_store(\n", "comm_error"),
    ('  File "/work/megatron/training/arguments.py", line 420, in validate_args\n'
     "    assert args.num_layers % args.pipeline_model_parallel_size == 0\n", "config_error"),
    ('  File "/env/site-packages/omegaconf/_utils.py", line 899, in format_and_raise\n'
     "    _raise(ex, cause)\n", "config_error"),
    ('  File "/env/site-packages/deepspeed/ops/op_builder/builder.py", line 480, in jit_load\n'
     "    op_module = load(name=self.name,\n", "config_error"),
])
def test_a_cut_traceback_whose_innermost_frames_are_specific_takes_their_family(text, kind):
    failure = classify(text)
    assert failure.kind == kind and "the traceback is cut" in failure.reason, failure.reason


# deepspeedai/DeepSpeed#5203 (tests/fixtures/oos-batch11/deepspeed/moe_stage2_offload_cpuadam_expert_grad_norm_all_
# reduce_crash_cut_1.log, shortened): a collective that carries a tensor also raises for a bad tensor (a bug)
_ALL_REDUCE = (
    "│ /env/site-packages/deepspeed/runtime/zero/stage_1_and_2.py:1949 in _average_expert_grad_norms          │\n"
    "│                                                                                                        │\n"
    "│ ❱ 1949 │   │   │   │   dist.all_reduce(scaled_norm_tensor, group=self.real_dp_process_group[i])        │\n"
    "│                                                                                                        │\n"
    "│ /env/site-packages/deepspeed/comm/comm.py:117 in log_wrapper\n")
# deepspeedai/DeepSpeedExamples#167 (tests/fixtures/oos-batch9/megatron_deepspeed/dse_megatron_zero3_nvme_aio_pending_
# ops_assertion_1.log, shortened): the launcher run as a module: its <module> frame is not an import
_LAUNCHER = (
    '  File "/opt/conda/lib/python3.8/runpy.py", line 87, in _run_code\n'
    "    exec(code, run_globals)\n"
    '  File "/opt/conda/lib/python3.8/site-packages/deepspeed/launcher/launch.py", line 171, in <module>\n'
    "    main()\n"
    '  File "/opt/conda/lib/python3.8/site-packages/deepspeed/launcher/launch.py", line 161, in main\n'
    "    sigkill_handler(signal.SIGTERM, None)  # not coming back\n")


@pytest.mark.parametrize("text", [
    _ALL_REDUCE, _LAUNCHER,
    # the ZeRO optimizer's frames, then the exception line: the exception decides, not the frames
    _NOTEBOOK + "RuntimeError: the partition count went negative\n",
    # the frames are only the outer ones of every failure
    'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    main()\n'
    '  File "/env/site-packages/transformers/trainer.py", line 1539, in train\n    return inner_training_loop(\n',
])
def test_frames_that_are_not_specific_or_an_exception_line_after_them_keep_the_crash(text):
    failure = classify(text)
    assert failure.kind == "crashed" and "the traceback is cut" not in failure.reason, failure.reason


@pytest.mark.parametrize("text", [
    # a barrier frame, then the job went on (a step record): not a traceback the log ends in
    _BELLE + "iteration 10/100 | elapsed time per iteration (ms): 512.0\n",
    # faulthandler's dump of a live process (no comma before 'in'; 'most recent call first')
    'Thread 0x00007f (most recent call first):\n  File "/env/site-packages/torch/distributed/distributed_c10d.py", '
    "line 3328 in barrier\n",
])
def test_no_cut_traceback_when_the_job_went_on_or_the_frames_are_a_stack_dump(text):
    tail = [line for line in reversed(text.splitlines()) if line.strip()]
    assert frames.cut_traceback(tail) is None


def test_the_frame_reader_gives_the_innermost_frame_first_in_every_rendering():
    for text, function in ((_BAICHUAN, "_configure_zero_optimizer"), (_NOTEBOOK, "_configure_zero_optimizer"),
                           (_BELLE, "barrier"), (_SWIFT_TE, "check_output")):
        tail = [line for line in reversed(text.splitlines()) if line.strip()]
        read = frames.cut_traceback(tail)
        assert read is not None and read[0].function == function


# ---- an installed package lacks a name the code uses, reached as a module attribute (families.config.ENVIRONMENT)

# NVIDIA-NeMo/Megatron-Bridge#1646 (tests/fixtures/oos-batch9/megatron_lm/mbridge_nemo2511_modelopt_no_
# distillationconfig_1.log): a console's caret decoration around the type and the message
_MBRIDGE = ("^^AttributeError^^: ^module 'modelopt.torch.distill.plugins.megatron' has no attribute "
            "'DistillationConfig'^^^^^^. \nDid you mean: 'load_distillation_config'?^\n")


@pytest.mark.parametrize("text", [
    _MBRIDGE,
    "[rank0]: AttributeError: module 'torch.distributed' has no attribute 'device_mesh'\n",  # made up: an old torch
])
def test_a_module_that_lacks_a_name_is_an_environment_config_error(text):
    failure = classify(text)
    assert failure.kind == "config_error" and "environment" in failure.reason, failure.reason


@pytest.mark.parametrize("text", [
    "Traceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n    x.sizes\n"
    "AttributeError: 'NoneType' object has no attribute 'sizes'\n",  # an object's attribute, not a module's
    "UserWarning: module 'apex' has no attribute 'amp', falling back to torch.cuda.amp\nTraceback (most recent call "
    "last):\n  File \"t.py\", line 3, in <module>\n    f()\nRuntimeError: the sampler ran dry\n",
])
def test_an_objects_attribute_or_a_warning_is_not_a_module_that_lacks_a_name(text):
    assert classify(text).kind == "crashed"


# ---- OpenSSH's client cannot reach a hostfile host's ssh server (families.config.ENVIRONMENT, the launcher's set-up)

# deepspeedai/DeepSpeedExamples#894 (tests/fixtures/oos-batch8/deepspeed/autotuning_pipeline_localhost_ssh_port22_
# refused_1.log)
@pytest.mark.parametrize("text", [
    "localhost: ssh: connect to host localhost port 22: Connection refused\n",
    "pdsh@n1: n2: ssh: Could not resolve hostname gpu-node-17: Name or service not known\n",  # made up
])
def test_an_ssh_server_that_refuses_or_a_host_that_does_not_resolve_is_a_set_up_error(text):
    assert classify(text).kind == "config_error"


@pytest.mark.parametrize("text", [
    "n2: ssh: connect to host n2 port 22: Connection timed out\n",  # the network's
    "n2: ssh: connect to host n2 port 22: No route to host\n",
])
def test_an_ssh_timeout_or_no_route_is_not_a_set_up_error(text):
    assert classify(text).kind != "config_error"


# ---- a collective cancelled or aborted is the network's event, a job cancelled is the scheduler's (families.network)
# No log of batches 1-11 holds such a line: the positives are made up in the shapes torch's blocking wait and watchdog
# use; the real excerpt is the negative (IGNF/myria3d#123, tests/fixtures/oos-batch11/lightning/myria3d_ddp_prepare_
# test_set_blocking_wait_step_cancelled_1.log: the log shows only SLURM's step cancellation, which stays cancelled).
_MYRIA3D = ("Preparing test set...:  46%|####6     | 31/67 [29:02<35:12, 58.67s/it]slurmstepd: error: *** STEP 6053.0 "
            "ON DEL2212S020 CANCELLED AT 2024-04-23T12:18:08 ***\nsrun: error: DEL2212S020: task 0: Terminated\n"
            "srun: Force Terminated StepId=6053.0\n")


@pytest.mark.parametrize("text", [
    "[rank1]: RuntimeError: Work WorkNCCL(SeqNum=812, OpType=ALLREDUCE, Timeout(ms)=600000) was cancelled in a "
    "blocking wait\n",
    "step 120\n[Rank 3] broadcast on the data-parallel group aborted after the peer closed the connection\n",
])
def test_a_cancelled_or_aborted_collective_is_a_communication_error(text):
    assert classify(text).kind == "comm_error"


@pytest.mark.parametrize(("text", "kind"), [
    (_MYRIA3D, "cancelled"),
    ("[W ProcessGroupNCCL.cpp:1000] Warning: a collective that times out will be aborted (NCCL_ASYNC_ERROR_HANDLING)"
     "\nTraceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n    f()\n"
     "RuntimeError: the sampler ran dry\n", "crashed"),
    ("loading\nAborted (core dumped)\n", "crashed"),
])
def test_a_job_cancellation_or_a_warning_about_aborts_is_not_a_cancelled_collective(text, kind):
    assert classify(text).kind == kind
