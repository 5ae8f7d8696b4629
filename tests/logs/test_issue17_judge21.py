"""Issue 17 (helper judge21): batch 19's misses as families. cuDNN's own status codes for an installation that
cannot serve the call (a sub-library that does not load, sub-libraries of different versions) are config_error like
ld.so's "cannot open shared object file"; a logger's record printed on a tqdm bar's line (the bar redraws with a
carriage return, no newline) is read as a record; a bare time field takes the unit the log's own legend declares; a
bare field named `*_loss` is never a time."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_fixtures import body, kind_of

from analysis.logs import parse_generic
from analysis.logs.outcome import trial_outcome

FIXTURES = Path(__file__).parents[1] / "fixtures"
# tests/fixtures/oos-batch19/megatron_lm/study_pretrain_gpt_te_cudnn_fused_attention_sublibrary_loading_failed_1.log
_CUDNN = FIXTURES / ("oos-batch19/megatron_lm/"
                     "study_pretrain_gpt_te_cudnn_fused_attention_sublibrary_loading_failed_1.log")
# tests/fixtures/oos-batch19/pytorch/alcf_wordplay_shakespeare_ddp_8gpu_100_steps_completed_1.log
_WORDPLAY = FIXTURES / "oos-batch19/pytorch/alcf_wordplay_shakespeare_ddp_8gpu_100_steps_completed_1.log"
# tests/fixtures/oos-batch5/other/tensorflowtts_fastspeech2_mel_loss_nan_step_95400_1.log (its bar glued to a record)
_TTS = FIXTURES / "oos-batch5/other/tensorflowtts_fastspeech2_mel_loss_nan_step_95400_1.log"

_TE = ("[rank0]: RuntimeError: /TransformerEngine/transformer_engine/common/fused_attn/fused_attn_f16_arbitrary_seqlen"
       ".cu:405 in function operator(): cuDNN Error: CUDNN_BACKEND_TENSOR_DESCRIPTOR cudnnFinalize failedptrDesc->"
       "finalize() cudnn_status: {status}. For more information, enable cuDNN error logging.\n")


def test_the_batch19_cudnn_sublibrary_failure_is_config_error():
    outcome = trial_outcome(body(_CUDNN))
    assert outcome.failure_kind == "config_error", outcome.reason


@pytest.mark.parametrize("status", ["CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED", "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH",
                                    "CUDNN_STATUS_VERSION_MISMATCH"])
def test_cudnn_installation_statuses_are_config_error(status):
    assert kind_of(_TE.format(status=status)) == "config_error"


@pytest.mark.parametrize("status", ["CUDNN_STATUS_EXECUTION_FAILED", "CUDNN_STATUS_BAD_PARAM",
                                    "CUDNN_STATUS_NOT_SUPPORTED", "CUDNN_STATUS_INTERNAL_ERROR"])
def test_other_cudnn_statuses_are_not_this_rule(status):
    assert kind_of(_TE.format(status=status)) != "config_error"


def test_a_warning_about_a_cudnn_sublibrary_is_not_the_end():
    warned = ("[W] cuDNN warning: CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED for libcudnn_engines_runtime_compiled, "
              "falling back to another engine\n"
              + "".join(f"step={n} loss=2.{n} dt={0.3 + n / 1000:.4f}\n" for n in range(1, 30))
              + "Training completed successfully!\n")
    assert kind_of(warned) != "config_error"


def test_the_batch19_wordplay_records_after_the_bar_are_read_in_the_legends_ms():
    reading = parse_generic.read_records(body(_WORDPLAY))
    assert reading.source.startswith("stated step time (dt"), reading.source
    assert len(reading.iterations) == 20
    times = sorted(i.step_time_s for i in reading.iterations)
    assert 0.05 < times[len(times) // 2] < 0.12  # the records' dt=55.9..115.6 ms, not seconds


_LEGEND = ("│     dt     │ Elapsed time per training step (measured in **ms**)         │\n"
           "│    mtps    │ Tokens per second, measured in MEGA (1 x 10^6) tokens / sec │\n")
_RECORD = "[2024-04-02 01:59:{s:02d}][INFO][trainer:837] - step={n} loss=3.1 dt={dt} mtps=1.5\n"


def _records(dt: str) -> str:
    return "".join(_RECORD.format(s=n, n=n, dt=dt) for n in range(1, 12))


def test_a_declared_unit_applies_only_to_bare_fields_of_that_name():
    assert parse_generic.declared_units(_LEGEND) == {"dt": "ms"}  # mtps's "measured in MEGA" is no time unit
    ms = parse_generic.read_records(_LEGEND + _records("88.8"))
    assert ms.iterations and all(abs(i.step_time_s - 0.0888) < 1e-9 for i in ms.iterations)
    written = parse_generic.read_records(_LEGEND + _records("0.5s"))  # a unit on the value itself wins
    assert written.iterations and all(abs(i.step_time_s - 0.5) < 1e-9 for i in written.iterations)
    bare = parse_generic.read_records(_records("0.9"))  # no legend: seconds, as before
    assert bare.iterations and all(abs(i.step_time_s - 0.9) < 1e-9 for i in bare.iterations)


def test_a_bar_with_its_own_postfix_is_still_only_a_bar():
    bar = " 45%|████▌     | 45/100 [00:30<00:36,  1.50it/s, loss=2.1, step_time=0.66]\n"
    assert parse_generic._record(bar, 0) is None  # noqa: SLF001 (the bar is training_bars' to read)
    glued = bar.rstrip("\n") + "[2024-04-02 01:59:46][INFO] - step=45 loss=2.1 dt=0.66\n"
    rec = parse_generic._record(glued, 0)  # noqa: SLF001
    assert rec is not None and rec.counter == 45


def test_a_bare_loss_named_after_a_duration_is_not_a_step_time():
    reading = parse_generic.read_records(body(_TTS))
    assert all(abs(i.step_time_s - 0.0353) > 1e-6 for i in reading.iterations)  # train_duration_loss = 0.0353
    timed = parse_generic.read_records("".join(f"step {n}: duration_loss = 0.0353, step duration = 0.4 s\n"
                                               for n in range(1, 12)))
    assert timed.iterations and all(abs(i.step_time_s - 0.4) < 1e-9 for i in timed.iterations)
