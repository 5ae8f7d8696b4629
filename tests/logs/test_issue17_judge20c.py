"""Issue 17 (helper judge20c): a healthy run stopped by hand. An interrupt (Ctrl-C's `^C` echo, KeyboardInterrupt,
SIGINT) right after a step record, with no line saying training finished and the planned steps not reached, is a
cancelled run; the same interrupt after the run said it finished (teardown) leaves it ok, and one after a line that is
not a step record stays a hang (_interrupted_while_stalled: people stop a job by hand when it stopped moving)."""

from __future__ import annotations

from pathlib import Path

from analysis.logs.outcome import measurements, trial_outcome

FIXTURES = Path(__file__).parents[1] / "fixtures"
# tests/fixtures/oos-batch18/torchtitan/torchtitan_blendcorpus_aurora_llama_step_105_ctrl_c_interrupt_1.log
_STOPPED = FIXTURES / "oos-batch18/torchtitan/torchtitan_blendcorpus_aurora_llama_step_105_ctrl_c_interrupt_1.log"
# made up, in Megatron's format: iterations 1..5 of a planned 10 (or 5)
_STEP = (" iteration {n:8d}/{total:8d} | consumed samples: {c:12d} | elapsed time per iteration (ms): 1751.8 | "
         "learning rate: 1.000E-06 | global batch size:    16 | lm loss: 1.028959E+01 | loss scale: 1.0 |\n")
_ZSH_EXIT = "^C\n[1]    169285 exit 1     torchrun train.py |\n       169290 interrupt  tee train.log\n"
_KEYBOARD = ("Traceback (most recent call last):\n  File \"train.py\", line 310, in <module>\n    main()\n"
             "  File \"train.py\", line 280, in main\n    loss.backward()\nKeyboardInterrupt\n")


def _steps(total: int, last: int = 5) -> str:
    return "".join(_STEP.format(n=n, total=total, c=16 * n) for n in range(1, last + 1))


def _kind(text: str) -> str:
    return trial_outcome(text, measured=measurements(text)).failure_kind


def test_the_batch18_run_stopped_by_hand_while_healthy_is_cancelled():
    text = _STOPPED.read_text().split("\n", 1)[1]  # without the fixture's `# SOURCE:` note
    outcome = trial_outcome(text)
    assert outcome.failure_kind == "cancelled", outcome.reason
    assert "stopped by hand" in outcome.reason


def test_an_interrupt_right_after_a_step_before_the_planned_end_is_cancelled():
    assert _kind(_steps(10) + _ZSH_EXIT) == "cancelled"
    assert _kind(_steps(10) + _KEYBOARD) == "cancelled"  # the frames of the loop it stopped are skipped back over
    assert _kind(_steps(10)) == "ok"  # the same steps without the interrupt: a healthy log


def test_an_interrupt_after_the_run_said_it_finished_stays_ok():
    assert _kind(_steps(5, last=5) + _ZSH_EXIT) == "ok"  # its last `iteration 5/5`: interrupted at teardown
    assert _kind(_steps(10) + "[after training is done] training finished\n" + _ZSH_EXIT) == "ok"


def test_an_interrupt_after_a_line_that_is_not_a_step_is_not_this_rule():
    stuck = _steps(10) + "saving checkpoint at iteration       5 to /ckpt\n" + _ZSH_EXIT
    assert _kind(stuck) != "cancelled"  # stopped while doing something else: the stall rules' question, not this one


def test_an_interrupt_far_above_the_end_is_not_this_rule():
    # made up: an interrupt the run got past (an evaluation hook's KeyboardInterrupt handled) and many steps after it
    early = _steps(10, last=2) + "KeyboardInterrupt\n" + "".join(
        _STEP.format(n=n, total=100_000, c=16 * n) for n in range(3, 400))
    assert _kind(early) == "ok"


def test_a_keyboard_interrupt_traceback_after_a_line_that_is_not_a_step_stays_a_hang():
    assert _kind("building datasets ...\n" + _KEYBOARD) == "hang"
