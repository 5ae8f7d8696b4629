"""Megatron / DeepSpeed log parsers, checked on every real fixture log (values read from the files by hand)."""

from __future__ import annotations

import pytest
from log_fixtures import ALL_LOGS, FIXTURES, body  # noqa: F401  (shared with the other log tests)

from analysis.logs.classify import classify
from analysis.logs.parse_megatron import (
    Iteration,
    MemoryReport,
    number,
    parse_ds_timers,
    parse_iterations,
    parse_memory,
    peak_memory_mb,
)
from analysis.logs.steady_state import steady_state


def fields(it: Iteration) -> tuple:
    return (it.iteration, it.step_time_s, it.tflops_per_gpu, it.tokens_per_gpu_per_s, it.samples_per_s, it.loss,
            it.global_batch)


def assert_fields(it: Iteration, expected: tuple) -> None:
    """Field by field: None must stay None, numbers match to 1e-9 (pytest.approx refuses None inside tuples
    since pytest 9)."""
    for got, want in zip(fields(it), expected, strict=True):
        assert got == (None if want is None else pytest.approx(want, rel=1e-9)), (fields(it), expected)


# fixture -> (count, (first: iteration, step_time_s, tflops, tgs, samples/s, lm loss, global batch), last)
ITERATIONS = {
    "alcf_mds_iter_kv_format_1.log": (1, (1, 108.8932, 49.66, 1203.674, 7.053, 11.133188, 768), None),
    "alcf_mds_iter_mem_1.log": (2, (1, 21.1338, 47.23, 775.250, 1.514, 11.19983, 32),
                                (2, 10.1543, 98.29, 1613.503, 3.151, 17.66422, 32)),
    "bigscience_mds_exit_duration_1.log": (1, (33240, 23.4914, None, None, None, 2.722675, 1024), None),
    "bigscience_mds_gpu_fault_cuda_oom_1.log": (1, (43680, 25.5934, None, None, None, 2.635663, 1024), None),
    "bigscience_mds_hang_eval_1.log": (1, (45000, 111.00, 141.26, None, 18.451, 2.113567, 2048), None),
    "bigscience_mds_iter_fp16_losscale_1.log": (8, (29020, 22.3066, None, None, None, 2.775923, 1024),
                                                (29090, 22.1192, None, None, None, 6.849044, 1024)),
    "bigscience_mds_iter_ok_1.log": (11, (31214, 106.46, 147.29, None, 19.238, 2.198845, 2048),
                                     (31251, 106.13, 147.75, None, 19.297, 2.235667, 2048)),
    "bigscience_mds_iter_wrapped_1.log": (5, (42780, 105.16, 149.10, None, 19.474, 2.117073, 2048),
                                          (42784, 111.14, 141.09, None, 18.428, 2.127643, 2048)),
    "mds_iter_ok_1.log": (2, (199, 14.2875, 69.85, 1146.733, 53.753, 5.905366, 768),
                          (200, 14.5414, 68.63, 1126.713, 52.815, 5.897035, 768)),
    "megatronlm_bert_iter_mem_1.log": (1, (30, 0.1234, None, None, None, 10.12573, 4), None),
    "megatronlm_iter_mem_new_1.log": (1, (20, 0.744, None, None, None, 1.020935, 16), None),
    "megatronlm_iter_ok_1.log": (3, (71, 5.3616, 243.6, None, None, 1.818812, 128),
                                 (73, 5.8299, 224.0, None, None, 1.798953, 128)),
    "megatronlm_old_iter_mem_1.log": (2, (5, 16.4915, None, None, None, None, None),
                                      (10, 1.9939, None, None, None, None, None)),
    "epfl_megatron_llm_iter_1.log": (4, (182, 126.9953, None, None, None, 2.382640, 1024),
                                     (185, 130.5549, None, None, None, 2.435094, 1024)),
    "megatronlm_iter_throughput_2.log": (3, (85, 5.5809, 234.0, None, None, 1.831795, 128),
                                         (87, 5.4445, 239.9, None, None, 1.814374, 128)),
    # the record and the next print ("Number of parameters ...") share one physical line
    "megatron_bridge_iter_merged_mem_gb_1.log": (1, (1, 20.2891, None, None, None, 12.58695, 128), None),
    # batch 1 (OUT_OF_SAMPLE.md): full Megatron-LM runs, and NaN runs whose records leave the loss out
    "llm_action_gpt345m_4dp_full_run_1.log": (13, (100, 0.2968, None, None, None, 9.729805, 8),
                                              (5000, 0.287, None, None, None, 0.1350079, 8)),
    "llm_action_gpt345m_4tp_full_run_1.log": (20, (100, 2.946, None, None, None, 9.654853, 8),
                                              (2000, 3.024, None, None, None, 3.732524, 8)),
    "bigscience_mds_grad_norm_nan_no_loss_1.log": (3, (5426, 4.2479, 78.36, None, 1.883, None, 8),
                                                   (5428, 4.2292, 78.71, None, 1.892, None, 8)),
    # the last record is cut mid-line after "loss scale": kept, its truncated last field dropped
    "epfl_falcon40b_nan_loss_no_lm_loss_1.log": (3, (3383, 7.6131, None, None, None, 0.7334521, 64),
                                                 (3385, 7.6243, None, None, None, None, 64)),
    "mds_nan_missing_lm_loss_1.log": (1, (9, 1.9792, 127.0, 2069.506, 6.063, None, 12), None),
    # batch 2 (OUT_OF_SAMPLE.md), in the corpus since: GPT-NeoX ("approx flops per GPU: 112.9TFLOPS" is not the
    # TFLOPs field), JUBE/BigScience-style seconds (the last record is cut after its step time), Megatron 2019 BERT
    "gptneox_llemma_bf16_one_iteration_timers_1.log": (1, (34, 4.1031, None, None, None, 11.18665, None), None),
    "jubench_13b_iteration_seconds_1.log": (5, (10, 35.8651, 199.03, None, 28.551, 13.32803, 1024),
                                            (50, 35.3357, None, None, None, None, 1024)),
    "megatron_2019_bert_iteration_lm_nsp_loss_1.log": (4, (200, 0.3131, None, None, None, None, None),
                                                       (500, 0.313, None, None, None, None, None)),
}


@pytest.mark.parametrize("name", ALL_LOGS)
def test_iterations_of_every_fixture(name):
    count, first, last = ITERATIONS.get(name, (0, None, None))
    its = parse_iterations(body(name), source=name)
    assert len(its) == count
    if count:
        assert_fields(its[0], first)
        assert_fields(its[-1], last or first)
        assert [it.iteration for it in its] == sorted({it.iteration for it in its})


def test_wrapped_records_are_rejoined_not_truncated():
    its = parse_iterations(body("bigscience_mds_iter_wrapped_1.log"))
    # tflops and samples/s sit on the third physical line of each record
    assert [it.tflops_per_gpu for it in its] == [149.10, 149.09, 147.58, 142.32, 141.09]
    assert [it.samples_per_s for it in its] == [19.474, 19.473, 19.276, 18.589, 18.428]


def test_same_iteration_from_several_ranks_is_kept_once_first_wins():
    line = (" iteration {i}/ 10 | elapsed time per iteration (ms): {ms} | lm loss: 1.0E+00 | "
            "global batch size: 8 | TFLOPs: 10.0 |")
    text = "\n".join(f"[default{r}]:" + line.format(i=i, ms=100 + r) for i in (2, 1) for r in (0, 3))
    its = parse_iterations(text)
    assert [(it.iteration, it.step_time_s) for it in its] == [(1, 0.1), (2, 0.1)]


def test_truncated_last_record_is_dropped_but_complete_ones_kept():
    text = body("mds_iter_ok_1.log") + "        iteration      201/  317892 | consumed samples:       154368 | elaps"
    assert [it.iteration for it in parse_iterations(text)] == [199, 200]


def test_truncated_record_keeps_fields_before_the_cut():
    text = " iteration 7/ 10 | elapsed time per iteration (ms): 250.0 | lm loss: 2.5E+00 | TFLOPs: 14"
    (it,) = parse_iterations(text)
    assert (it.step_time_s, it.loss, it.tflops_per_gpu) == (0.25, 2.5, None)  # "14" may be cut from "149.10"


def test_records_without_a_closing_pipe_keep_their_last_field():
    """A variant that never closes its records with ' |': the field at the end of each line is complete (only
    the log's last record may have been cut by the job's death)."""
    line = " iteration {i}/ 10 | elapsed time per iteration (ms): 250.0 | lm loss: 2.5E+00 | tokens/s: 4096.5"
    its = parse_iterations("\n".join(line.format(i=i) for i in range(1, 5)))
    assert [it.tokens_per_s for it in its] == [4096.5, 4096.5, 4096.5, None]


def test_a_unit_glued_to_a_value_is_read():
    text = " iteration 3/ 10 | elapsed time per iteration (ms): 250.0 | lm loss: 2.5E+00 | TFLOPs: 149.1TFLOPs |"
    (it,) = parse_iterations(text)
    assert it.tflops_per_gpu == 149.1


def test_record_without_step_time_is_dropped_with_a_note_naming_file_and_line():
    text = "hello\n iteration 3/ 10 | consumed samples: 24 | lm loss: 2.0E+00 |\n"
    notes: list[str] = []
    assert parse_iterations(text, source="run.log", notes=notes) == []
    assert notes == ["run.log:2: iteration 3 has no step time field; record ignored"]


def test_non_numeric_value_loses_that_field_with_a_note():
    notes: list[str] = []
    (it,) = parse_iterations(" iteration 3/ 10 | elapsed time per iteration (ms): 1.0 | lm loss: abc |",
                             source="x", notes=notes)
    assert (it.step_time_s, it.loss) == (0.001, None)
    assert len(notes) == 1 and "'lm loss' has value 'abc'" in notes[0]


@pytest.mark.parametrize("value", ["0.0", "-12.5", "nan", "inf", "-inf", "NaN"])
def test_impossible_step_times_are_dropped_never_divided_by(value):
    notes: list[str] = []
    text = (f" iteration 1/ 3 | elapsed time per iteration (ms): {value} | lm loss: 1.0 |\n"
            " iteration 2/ 3 | elapsed time per iteration (ms): 100.0 | lm loss: 1.0 |\n")
    assert [it.iteration for it in parse_iterations(text, notes=notes)] == [2]
    assert "zero, negative or not finite" in notes[0]


def test_two_records_merged_onto_one_line_are_both_read():
    # two ranks printed at once: no newline between the records; with and without torchrun's prefix
    one = " iteration 7/ 9 | elapsed time per iteration (ms): 100.0 | TFLOPs: 10.0 |"
    two = " iteration 8/ 9 | elapsed time per iteration (ms): 300.0 | TFLOPs: 30.0 |"
    for text in (one + two, f"[default0]:{one}[default1]:{two}", one[:-1] + two):
        its = parse_iterations(text)
        assert [(it.iteration, it.step_time_s, it.tflops_per_gpu) for it in its] == [(7, 0.1, 10.0),
                                                                                        (8, 0.3, 30.0)], text


@pytest.mark.parametrize("line, expected", [
    # Megatron-LM >= 26.5 style parenthetical and the tokens-per-GPU variants seen in other trees
    (" iteration 5/ 9 | elapsed time per iteration (ms): 1548.1 | throughput per GPU (TFLOP/s/GPU): 496.3 "
     "(avg 496.1) | Tokens per second per GPU (Tok/s/GPU): 2645.8 |", (5, 1.5481, 496.3, 2645.8)),
    (" iteration 6/ 9 | elapsed time per iteration (ms): 10.0 | tokens per GPU (tokens/s/GPU): 9640.7 |",
     (6, 0.01, None, 9640.7)),
    ("[rank3]: iteration 7/ 9 | elapsed time per iteration (s): 2.5 |", (7, 2.5, None, None)),
])
def test_field_variants(line, expected):
    (it,) = parse_iterations(line)
    assert (it.iteration, it.step_time_s, it.tflops_per_gpu, it.tokens_per_gpu_per_s) == pytest.approx(expected)


def test_lines_that_only_mention_iterations_are_not_records():
    text = ("[Rank 0] (after 20 iterations) memory (MB) | allocated: 1.0 | max allocated: 2.0 |\n"
            "saving checkpoint at iteration     200 to ckpt\n[iteration] datetime: 2024-09-13 07:04:42\n"
            "valid loss at iteration 45000 | lm loss value: 2.327091E+00 | lm loss PPL: 1.024808E+01 |\n")
    assert parse_iterations(text) == []


# fixture -> [(rank, iteration, allocated, max allocated, reserved, max reserved) in MiB]
MEMORY = {
    "alcf_mds_iter_kv_format_1.log": [(0, 1, 18243.64111328125, 50664.2548828125, 54556.0, 54556.0)],
    "alcf_mds_iter_mem_1.log": [(1, 1, 14165.525390625, 22332.37255859375, 24642.0, 35824.0),
                                (0, 1, 14165.525390625, 22332.37255859375, 24642.0, 32994.0)],
    "mds_iter_ok_1.log": [(None, 199, 6.01 * 1024, 19.52 * 1024, None, None),
                          (None, 200, 6.01 * 1024, 19.52 * 1024, None, None)],
    "megatronlm_bert_iter_mem_1.log": [(0, 20, 6245.033203125, 6245.0361328125, 6554.0, 6554.0)],
    "megatronlm_iter_mem_new_1.log": [(0, 20, 3270.16, 5670.39, 6406.00, 6406.00)],
    "megatronlm_old_iter_mem_1.log": [(None, 5, 10250.5693359375, 12606.06201171875, 17482.0, 17482.0)],
    # Megatron-LM >= 0.13 keys, in GB (GiB): mem-allocated-gigabytes, mem-max-reserved-gigabytes, ...
    "megatron_bridge_iter_merged_mem_gb_1.log": [(0, 1, 51.072 * 1024, 194.41 * 1024, 216.89 * 1024, 216.89 * 1024)],
    "llm_action_gpt345m_4dp_full_run_1.log": [(0, 100, 6816.88818359375, 8696.8515625, 8786.0, 8786.0)],
    "llm_action_gpt345m_4tp_full_run_1.log": [(0, 100, 1772.68505859375, 3059.67138671875, 3394.0, 3394.0),
                                              (2, 100, 1794.56005859375, 3081.17138671875, 3390.0, 3390.0),
                                              (3, 100, 1795.06005859375, 3081.67138671875, 3398.0, 3398.0),
                                              (1, 100, 1774.18505859375, 3065.67138671875, 3398.0, 3398.0)],
    "gptneox_llemma_bf16_one_iteration_timers_1.log": [(None, 34, 59.65 * 1024, 63.31 * 1024, None, None)],
    "megatron_2019_bert_iteration_lm_nsp_loss_1.log": [(None, 100, 5133.326171875, 7899.060546875, 9324.0, 9324.0)],
}


@pytest.mark.parametrize("name", ALL_LOGS)
def test_memory_of_every_fixture(name):
    reports = parse_memory(body(name), source=name)
    got = [(r.rank, r.iteration, r.allocated_mb, r.max_allocated_mb, r.reserved_mb, r.max_reserved_mb)
           for r in reports]
    assert got == MEMORY.get(name, [])


def test_peak_memory_is_the_worst_rank():
    reports = parse_memory(body("alcf_mds_iter_mem_1.log"))
    assert peak_memory_mb(reports, "max_reserved_mb") == 35824.0  # rank 1, not rank 0's 32994.0
    assert peak_memory_mb([], "max_reserved_mb") is None


@pytest.mark.parametrize("line, expected", [
    ("[Rank 2] before training memory (GB) | allocated: 1.5 | max allocated: 2.0 | reserved: 3.0 | "
     "max reserved: 4.0", MemoryReport(2, None, 1536.0, 2048.0, 3072.0, 4096.0)),
    ("after 5 iterations memory (MB) | allocated: 1.0 | max allocated: 2.0 | cached: 3.0 | max cached: 4.0",
     MemoryReport(None, 5, 1.0, 2.0, 3.0, 4.0)),
    ("[2024-01-01 00:00:00,000] [INFO] [utils.py:800:see_memory_usage] MA 0.5 GB         Max_MA 1.0 GB         "
     "CA 2.0 GB         Max_CA 2 GB ", MemoryReport(None, None, 512.0, 1024.0, 2048.0, 2048.0,
                                                   kind="deepspeed_see_memory")),
])
def test_memory_variants(line, expected):
    assert parse_memory(line) == [expected]


def test_ds_timers():
    rows = parse_ds_timers(body("mds_iter_ok_1.log"))
    assert [r["global_step"] for r in rows] == [199, 200]
    assert rows[0]["running_avg_samples_per_s"] == pytest.approx(58.730622229657506)
    assert rows[1]["curr_samples_per_s"] == pytest.approx(58.75503515561452)
    assert (rows[0]["mem_allocated_gb"], rows[0]["max_mem_allocated_gb"]) == (6.01, 19.52)
    neox = parse_ds_timers(body("gptneox_llemma_bf16_one_iteration_timers_1.log"))  # GPT-NeoX prints them too
    assert [r["global_step"] for r in neox] == [34] and neox[0]["max_mem_allocated_gb"] == 63.31
    with_timers = ("mds_iter_ok_1.log", "gptneox_llemma_bf16_one_iteration_timers_1.log")
    assert all(parse_ds_timers(body(n)) == [] for n in ALL_LOGS if n not in with_timers)


def _synthetic_log(n_iterations: int) -> str:
    """A Megatron-DeepSpeed log shaped like mds_iter_ok_1.log: timer, memory and iteration lines per step."""
    lines = []
    for i in range(1, n_iterations + 1):
        lines.append(f"[2024-03-07 15:27:02,646] [INFO] [timer.py:260:stop] epoch=0/micro_step={i}/global_step={i}, "
                     "RunningAvgSamplesPerSec=58.73, CurrSamplesPerSec=61.35, MemAllocated=6.01GB, "
                     "MaxMemAllocated=19.52GB")
        lines.append(f"[2024-03-07 15:27:15,063] [INFO] [logging.py:96:log_dist] [Rank 0] step={i}, skipped=0, "
                     "lr=[0.00024, 0.00024], mom=[(0.9, 0.999), (0.9, 0.999)]")
        lines.append(f" iteration {i:8d}/  317892 | consumed samples: {i * 768:12d} | consumed tokens: "
                     f"{i * 3145728:12d} | elapsed time per iteration (ms): {14287.5 + i % 7:.1f} | learning rate: "
                     "2.407E-04 | global batch size:   768 | lm loss: 5.905366E+00 | loss scale: 8192.0 | actual "
                     "seqlen:  4096 | number of skipped iterations:   0 | number of nan iterations:   0 | samples "
                     "per second: 53.753 | tokens per gpu per second (tgs): 1146.733 | TFLOPs: 69.85 |")
        lines.append("time (ms) | forward-compute: 58.16 | backward-compute: 42.66 | optimizer: 57.50")
    lines.append(f"[Rank 0] (after {n_iterations} iterations) memory (MB) | allocated: 6245.0 | max allocated: "
                 "6245.0 | reserved: 6554.0 | max reserved: 6554.0")
    return "\n".join(lines) + "\n"


def test_a_200_iteration_log_is_summarised_and_judged_ok():
    # The speed of this path (1,000 such logs in < 10 s) is a benchmark, not a timed test: on a shared 2-core machine
    # its CPU time read 7.7-10.9 s from run to run for the same code. `python tests/benchmarks/bench_analysis.py`
    # prints the figure (docs/benchmarks.md).
    text = _synthetic_log(200)
    summary = steady_state(parse_iterations(text))
    parse_memory(text)
    failure = classify(text, exit_code=0, has_result=True)
    assert (summary.n_total, failure.kind) == (200, "ok")


@pytest.mark.parametrize("text, expected", [
    ("[parasweep] iteration 3/6 | phase measure | step time (ms): 1.0", True),
    (" iteration      199/  317892 | consumed samples:       152832 |", True),
    ("[default7]: iteration     1232/  159576 | consumed samples", True),
    ("NCCL WARN Call to connect returned Connection refused, retrying", False),
    ("| number of skipped iterations:   0 | number of nan iterations:   0 |", False),
    ("> compiling and loading fused kernels ...", False),
])
def test_has_iteration_is_the_monitors_progress_signal(text, expected):
    from analysis.logs.parse_megatron import has_iteration

    assert has_iteration(text) is expected


@pytest.mark.parametrize("text, expected", [
    ("11.5K", 11_500.0), (" 2.25M ", 2.25e6), ("85.8G", 85.8e9), ("3k", 3000.0),  # magnitude suffixes
    ("123.4TFLOPs", 123.4), ("562.73 ms", 562.73),  # a unit glued on or after a blank is a unit, not a magnitude
])
def test_numbers_with_a_magnitude_suffix_are_scaled(text, expected):
    assert number(text) == pytest.approx(expected)
