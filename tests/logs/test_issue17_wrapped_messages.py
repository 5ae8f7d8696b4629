"""Issue 17 (coordinator, batch 8's misses): a configuration rule's message wrapped over several lines is read as one
message, and Python 3.11+'s caret lines never hide the line above them. Each rule with real excerpts (batch 8,
sources in tests/fixtures/oos-batch8/INDEX.tsv), a look-alike in another framework's spelling, and text of other kinds
that must not change."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify

TB = "Traceback (most recent call last):\n"
FRAME = '  File "/opt/venv/lib/python3.11/site-packages/deepspeed/runtime/zero/stage3.py", line 120, in __init__\n'


@pytest.mark.parametrize("text", [
    # batch 8 lightning/deepspeed_stage_3_offload_torch_adamw_zero_runtime_exception_1.log (wrapped by the reporter)
    TB + FRAME + "ZeRORuntimeException: You are using ZeRO-Offload with a client provided \n"
                 "optimizer (<class 'torch.optim.adamw.AdamW'>) which in most cases will yield \n"
                 "poor performance. Please either use deepspeed.ops.adam.DeepSpeedCPUAdam or set \n"
                 "an optimizer in your ds-config \n",
    # batch 8 deepspeed/lmflow_raft_align_zero_offload_client_adamw_exception_1.log (a class repr cut by the wrap)
    "deepspeed.runtime.zero.utils.ZeRORuntimeException: You are using ZeRO-Offload with a client provided optimizer "
    "(<class 'transformers.optimization.AdamW'\n) which in most cases will yield poor performance. Please either use "
    "deepspeed.ops.adam.DeepSpeedCPUAdam or set an optimizer in your ds-config.\n",
    # look-alike: a ValueError of another stack whose rule is on its second line
    TB + '  File "train.py", line 40, in build\nValueError: the number of attention heads (24) of this model\n'
         "must be divisible by the tensor parallel size (16)\n",
])
def test_a_wrapped_rule_is_read_as_one_message(text):
    assert classify(text).kind == "config_error"


@pytest.mark.parametrize("text", [
    # batch 7 nemo/fastpitch_finetune_hifitts_word_emb_size_mismatch_1.log: a colon opens a list of details
    TB + '  File "nemo/core/classes/modelPT.py", line 1, in load\n'
         "RuntimeError: Error(s) in loading state_dict for FastPitchModel:\n"
         "\tsize mismatch for fastpitch.encoder.word_emb.weight: copying a param with shape torch.Size([115, 384]) "
         "from checkpoint, the shape in current model is torch.Size([114, 384]).\n",
    # a finished sentence, then a line in lower case that names a configuration quantity: not read with the message
    TB + '  File "model.py", line 9, in load\nValueError: too many values to unpack (expected 3, got 2).\n'
         "layers of the model were built before the failure\n",
    # no sentence end, but the next line starts a new record (upper case)
    TB + '  File "model.py", line 9, in load\nValueError: too many values to unpack (expected 3, got 2)\n'
         "Layers of the model were built before the failure\n",
])
def test_a_next_line_that_does_not_continue_the_message_is_not_read_with_it(text):
    assert classify(text).kind == "crashed"


@pytest.mark.parametrize("text", [
    # batch 8 deepspeed/ds_batch_assertion_message_missing_space_1.log (the rule, then its caret line)
    "train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * world_size2 != 1 * 1 * 1\n"
    "                                                                                 ^^^^^^^^^^\n",
    # look-alike: Python 3.11's tilde-and-caret marker under a Megatron-style rule
    "world size (12) is not divisible by tensor model parallel size (8) times pipeline model parallel size (1)\n"
    "    ~~~~~~~~~~^^^^^^^^^\n",
])
def test_caret_lines_never_hide_the_line_above(text):
    assert classify(text).kind == "config_error"
    assert classify(text.splitlines()[0] + "\n").kind == "config_error"   # the same without the marker


@pytest.mark.parametrize("text", [
    # batch 8 deepspeed/chemformer_engine_args_local_rank_keyerror_1.log (the frame shortened)
    TB + '  File "train.py", line 88, in <module>\n    local_rank = int(os.environ["LOCAL_RANK"])\n'
         "KeyError: 'LOCAL_RANK'\n",
    # look-alikes: other variables of the env:// convention, and torch's own message for them
    TB + '  File "pretrain.py", line 12, in init\n    world = int(os.environ["WORLD_SIZE"])\nKeyError: \'WORLD_SIZE\'\n',
    "ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable MASTER_ADDR "
    "expected, but not set\n",
    # batch 8 megatron_lm/flagscale_aquila_te_no_dot_product_attention_support_1.log (last line)
    TB + '  File "transformer_engine/pytorch/attention.py", line 5, in forward\n'
         "ValueError: No dot product attention support for the provided inputs!\n",
    # look-alike: the wording of another Transformer Engine release
    "ValueError: No dot product attention backend is available for the provided inputs. Please run with "
    "NVTE_DEBUG=1 NVTE_DEBUG_LEVEL=2 to find out the reasons for disabling all backends.\n",
])
def test_a_launch_or_attention_setting_the_environment_cannot_serve_is_a_configuration_error(text):
    assert classify(text).kind == "config_error"


@pytest.mark.parametrize("text", [
    # a KeyError of the job's own data or state dict is a crash, not the launch's environment
    TB + '  File "train.py", line 40, in load\n    x = batch["labels"]\nKeyError: \'labels\'\n',
    TB + '  File "train.py", line 40, in load\n    r = table["RANK_MAP"]\nKeyError: \'RANK_MAP\'\n',
])
def test_other_key_errors_stay_crashes(text):
    assert classify(text).kind == "crashed"


@pytest.mark.parametrize("text", [
    # batch 9 deepspeed/ds_zero3_param_fetch_queue_backward_frames_1.log (shortened): cut before its exception line
    '  File "/x/deepspeed/runtime/engine.py", line 1796, in backward\n'
    "    self.optimizer.backward(loss, retain_graph=retain_graph)\n"
    '  File "/x/torch/autograd/__init__.py", line 200, in backward\n'
    "    Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass\n",
    # the same with launcher rank prefixes, and a rich traceback cut inside a frame's code box
    '[rank3]:   File "/x/torch/distributed/checkpoint/default_planner.py", line 233, in create_local_plan\n'
    "[rank3]:     return create_default_local_load_plan(\n",
    "│ /home/u/.local/lib/python3.10/site-packages/deepspeed/runtime/config.py:935 in         │\n"
    "│ _configure_train_batch_size                                                                      │\n"
    "│   934 │   │   self._set_batch_related_parameters()                                               │\n",
])
def test_a_log_cut_inside_a_traceback_is_a_crash(text):
    verdict = classify(text)
    assert verdict.kind == "crashed" and "ends inside a traceback" in verdict.reason


@pytest.mark.parametrize("text", [
    # faulthandler's dump of a live process (no comma before 'in'): a hang's evidence, not a crash
    'Thread 0x00007f (most recent call first):\n  File "/x/deepspeed/runtime/engine.py", line 1456 in '
    "_checkpoint_tag_validation\n",
    # a traceback followed by step records: the job went on
    '  File "/x/train.py", line 3, in step\n    warn()\niteration 10/100 | elapsed time per iteration (ms): 512.0\n',
])
def test_a_live_stack_dump_or_a_traceback_the_run_got_past_is_not_a_cut_crash(text):
    assert "ends inside a traceback" not in classify(text).reason


@pytest.mark.parametrize("text", [
    # batch 9 slurm/capreolus_monobert_srun_time_limit_invalid_1.log
    "`srun: error: Unable to allocate resources: Requested time limit is invalid (missing or exceeds some limit)`\n",
    # look-alikes: salloc's denial and sbatch's own wording
    "salloc: error: Job submit/allocate failed: Job allocation request denied\n",
    # (an invalid account is a request SLURM can never satisfy: config_error since judge36, test_issue17_judge36.py)
    "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's size "
    "and/or time limits)\n",
])
def test_a_scheduler_that_refuses_the_allocation_is_a_refused_submission(text):
    assert classify(text).kind == "submit_refused"
