"""Issue 17 (coordinator, stop 43, after batch 42's score: in sample). (1) A Ctrl-C reaches the DataLoader workers
before the launcher says so: their "Process ForkProcess-N:" headers are the interrupt's echo, not a stall's last line.
(2) W&B's "api_key not configured (no-tty)" is the job's environment. (3) A quoted setting with two spaces around its
`=` (transformers' Qwen2 padding-side check). (4) apex's scaler names only the new scale: two overflows in a row that
leave it at 1.0 are a scale clamped at its floor; DeepSpeed's "Reducing hysteresis to 1" is no scale. Records: real
lines with their source."""

from __future__ import annotations

from analysis.logs.outcome import trial_outcome

# github Panlichen/Megatron-LM (oos-batch42): a run stopped by Ctrl-C one second after its iteration-39 record.
_RECORD = (" [2024-10-02 15:19:06] iteration       39/     200 | consumed samples:         2808 | elapsed time per "
           "iteration (ms): 4149.1 | learning rate: 9.750000E-06 | global batch size:    72 | lm loss: 5.9077\n")
_SIGINT = ("[2024-10-02 15:19:07,293] torch.distributed.elastic.agent.server.api: [WARNING] Received Signals.SIGINT "
           "death signal, shutting down workers\n")


def test_the_interrupts_echo_in_worker_processes_is_not_a_stall() -> None:
    echo = "Process ForkProcess-11:\nProcess ForkProcess-4:\nTraceback (most recent call last):\n"
    text = _RECORD.replace("39/", "38/") + _RECORD + echo + _SIGINT
    assert trial_outcome(text).failure_kind == "cancelled"


def test_an_interrupt_after_a_non_step_line_is_still_a_stall() -> None:
    text = _RECORD + "saving checkpoint at iteration 39 to /ckpt\nProcess ForkProcess-11:\n" + _SIGINT
    assert trial_outcome(text).failure_kind == "hang"


def test_a_missing_wandb_key_is_the_environment() -> None:
    # https://github.com/unslothai/unsloth/issues/1914 (oos-batch42)
    text = "wandb: ERROR api_key not configured (no-tty). call wandb.login(key=[your_api_key])\nTraceback (most " \
           "recent call last):\n  File \"train.py\", line 3, in <module>\n"
    assert trial_outcome(text).failure_kind == "config_error"


def test_a_quoted_setting_with_spaces_around_its_equals_sign() -> None:
    # github Minami-su/deepspeed-grpo-qlora-vllm (oos-batch42): transformers' Qwen2 flash-attention check
    line = ("[rank0]: ValueError: You are attempting to perform batched generation with padding_side='right' this may "
            "lead to unexpected behaviour for Flash Attention version of Qwen2. Make sure to  call "
            "`tokenizer.padding_side  = 'left'` before tokenizing the input.")
    assert trial_outcome(line + "\n").failure_kind == "config_error"


def test_two_overflows_leaving_the_scale_at_one_are_a_clamp() -> None:
    # https://github.com/NVIDIA/NeMo/issues/1225 (oos-batch42): NeMo 0.x with apex AMP O2
    pair = ("[NeMo W 2020-09-26 17:52:50 actions:1479] Loss is NaN or inf.\n"
            "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 1.0\n")
    assert trial_outcome(pair * 2).failure_kind == "diverged"
    falling = pair.replace("to 1.0", "to 4.0") + pair.replace("to 1.0", "to 2.0")
    assert trial_outcome(falling).failure_kind != "diverged"  # still halving: a scale search, not a clamp


def test_deepspeeds_hysteresis_is_no_scale() -> None:
    # https://github.com/deepspeedai/DeepSpeedExamples/issues/503 (oos-batch4): a healthy run's two overflow skips
    line = ("[2023-05-09 12:42:37,384] [INFO] [loss_scaler.py:188:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping "
            "step. Attempted loss scale: 65536, but hysteresis is 2. Reducing hysteresis to 1\n")
    assert trial_outcome(line * 2).failure_kind != "diverged"
