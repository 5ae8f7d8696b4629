"""Judging is total: generated hostile logs never make parsing, classification or trial_outcome raise, and what
comes back is sane (a known kind, a reason, finite metrics that strict JSON accepts).

Generators: random lines built from the formats' own tokens, random bytes, real fixture lines shuffled and
spliced, several ranks' lines merged onto one physical line, and real records whose numbers are replaced by
hostile ones. Each generated example is fed as LOGS_PER_EXAMPLE logs (the text, its bytes, its bytes with invalid
UTF-8, truncated, lines reversed, repeated, carriage returns for newlines, newlines removed between lines).

Default run: 5 generators x 280 examples x 8 = 11,200 logs (about 45 s here). Slow tier (-m slow): 1,400 examples x 8 =
11,200 logs from all generators with longer logs, plus 6 logs of a few megabytes each (about 95 s; 2,800 examples took
166 s of a 30-minute CI run on 27 Nov). Speed on logs of
tens of megabytes is measured by tests/benchmarks/bench_judge.py.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from log_fixtures import CORPUS_FILES, body

from analysis.logs.classify import FAILURE_KINDS, classify
from analysis.logs.logtext import normalize
from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_generic import read_records
from analysis.logs.parse_hf import parse_final_metrics
from analysis.logs.parse_megatron import parse_ds_timers, parse_iterations, parse_memory
from analysis.logs.parse_nemo import parse_progress_bars
from analysis.logs.read_log import read_log
from analysis.logs.steady_state import steady_state, usable
from launcher.core.strict_json import dumps

LOGS_PER_EXAMPLE = 8
FAST = settings(max_examples=280, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SLOW = settings(max_examples=840, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Pieces of every format this library reads, and of the failures it looks for.
TOKENS = [
    " iteration ", "iteration=", "/", " | ", "|", ":", "=", " ", "\n", "\r", "\t", "\x00", "0", "1", "7", "42",
    "100", "3.5", "-1", "nan", "inf", "-inf", "1e309", "9" * 40, "E+00", "elapsed time per iteration (ms)",
    "elapsed time per iteration (s)", "TFLOPs", "throughput per GPU (TFLOP/s/GPU)", "tokens per gpu per second (tgs)",
    "lm loss", "global batch size", "samples per second", "Training epoch 0, ", "train_step_timing in s",
    "reduced_train_loss", "global_step", "Epoch 0: ", "%|█▏ | ", "it/s", "s/it", " [01:23<10:12, ", "]",
    "[default3]:", "[rank1]:", "  2: ", "[1,3]<stdout>:", "[2024-04-06 03:02:12] ", "PARASWEEP_RESULT ", "{", "}",
    '"step_time_s": ', '"tokens_per_s": ', '"mfu": ', "NaN", "Infinity", "[[[[", "Traceback (most recent call last)",
    "[Rank 0] (after 20 iterations) memory (MB) | allocated: ", "max reserved: ", "memory (GB) | ",
    "mem-max-reserved-gigabytes: ", "MemAllocated=", "MaxMemAllocated=", "GB", "epoch=0/micro_step=",
    "/global_step=", ", RunningAvgSamplesPerSec=", ", CurrSamplesPerSec=", "SamplesPerSec=", "'train_runtime': ",
    "'train_steps_per_second': ", "TrainOutput(global_step=", "  global_batch_size ........ ", "  seq_length ...... ",
    "peak_memory_usage: ", "time (ms) | ", "CUDA out of memory", "NCCL WARN ", "Connection refused",
    "NVRM: Xid (PCI:0000:00:00): ", "79", "ModuleNotFoundError: No module named '", "CANCELLED AT ", "DUE TO TIME LIMIT",
    "srun: Terminating job step", "> compiling and loading fused kernels ...", "as PyTorch extensions root...",
    "exits with return code = ", "exitcode  : ", "Killed", "AssertionError", "arguments.py", "is not divisible by",
]
HOSTILE_NUMBERS = ["nan", "NaN", "inf", "-inf", "0", "0.0", "-0", "-12.5", "1e309", "-1e309", "1e-320", "9" * 5000,
                   "", "0x10", "1_000", "١٢", "3.4.5", "1e30"]


def _fixture_lines() -> list[str]:
    lines: list[str] = []
    for name in CORPUS_FILES:
        lines.extend(body(name).splitlines())
    return lines


FIXTURE_LINES = _fixture_lines()
NUMBERED_LINES = [line for line in FIXTURE_LINES if any(c.isdigit() for c in line) and len(line) < 2000]

token_logs = st.lists(st.lists(st.sampled_from(TOKENS), max_size=40).map("".join), max_size=30).map("\n".join)
text_logs = st.text(max_size=3000)
byte_logs = st.binary(max_size=3000)


@st.composite
def spliced_logs(draw, max_lines: int = 60) -> str:
    """Real lines, shuffled, cut at random places and glued back in another order."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    lines = rng.sample(FIXTURE_LINES, k=rng.randint(0, min(max_lines, len(FIXTURE_LINES))))
    pieces = []
    for line in lines:
        cut = rng.randint(0, len(line))
        pieces += [line[:cut], line[cut:]] if rng.random() < 0.3 else [line]
    rng.shuffle(pieces)
    return "\n".join(pieces)


@st.composite
def merged_rank_logs(draw, max_lines: int = 40) -> str:
    """Several ranks' real lines, prefixed, with several records written onto one physical line."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    out, line = [], ""
    for _ in range(rng.randint(0, max_lines)):
        prefix = rng.choice(["[default{}]:", "[rank{}]:", "{}: ", "[1,{}]<stdout>:", ""]).format(rng.randint(0, 15))
        line += prefix + rng.choice(FIXTURE_LINES)
        if rng.random() < 0.5:
            out.append(line)
            line = ""
    return "\n".join(out + [line])


@st.composite
def mutated_number_logs(draw, max_lines: int = 40) -> str:
    """Real records whose numbers are replaced by zero, negative, non-finite, huge or malformed ones."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    out = []
    for line in rng.sample(NUMBERED_LINES, k=rng.randint(0, min(max_lines, len(NUMBERED_LINES)))):
        chars, i = [], 0
        while i < len(line):
            if line[i].isdigit():
                j = i
                while j < len(line) and (line[j].isdigit() or line[j] in ".eE+-"):
                    j += 1
                chars.append(rng.choice(HOSTILE_NUMBERS) if rng.random() < 0.5 else line[i:j])
                i = j
            else:
                chars.append(line[i])
                i += 1
        out.append("".join(chars))
    return "\n".join(out)


def variants(log: str | bytes) -> list[str | bytes]:
    """The LOGS_PER_EXAMPLE logs one generated example is fed as."""
    text = log if isinstance(log, str) else log.decode("utf-8", errors="replace")
    raw = log if isinstance(log, bytes) else log.encode("utf-8", errors="surrogatepass")
    lines = text.split("\n")
    out = [log, raw, raw[: len(raw) // 2] + b"\xff\xfe\x80" + raw[len(raw) // 2:], text[: len(text) * 2 // 3],
           "\n".join(reversed(lines)), text * 3, text.replace("\n", "\r"), "".join(lines)]
    assert len(out) == LOGS_PER_EXAMPLE
    return out


CONTEXTS = [dict(log_format="auto"), dict(log_format="workload", exit_code=0, slurm_state="COMPLETED"),
            dict(log_format="megatron", exit_code=1, slurm_state="FAILED"), dict(log_format="auto", exit_code=137),
            dict(log_format="megatron", slurm_state="TIMEOUT"),
            dict(log_format="auto", slurm_state="RUNNING", seconds_since_progress=1e9, hang_timeout_s=1.0)]


def judge_everything(log: str | bytes, context: dict) -> None:
    out = trial_outcome(log, capacity_gb=80.0, tokens_per_step=4096, peak_tflops=989.0, **context)
    assert not out.reason.startswith("judging failed"), out.reason
    assert out.failure_kind in FAILURE_KINDS and out.reason
    assert all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
               for v in out.metrics.values()), out.metrics
    dumps(out.metrics)
    if out.failure_kind == "ok":  # a step time, or a reason that says the log gives none
        assert out.metrics["step_time_s"] > 0 if "step_time_s" in out.metrics else "no step time" in out.reason
    # the pieces trial_outcome guards are total on their own too
    text = normalize(log)
    its = parse_iterations(text, notes=[])
    assert all(usable(it.step_time_s) for it in its)
    if its:
        stats = steady_state(its)
        assert stats.median_step_time_s > 0
    parse_memory(text, notes=[])
    parse_ds_timers(text)
    parse_progress_bars(text, notes=[])
    generic = read_records(text, tokens_per_step=4096, world_size=8, notes=[])
    assert all(usable(it.step_time_s) for it in generic.iterations)
    parse_final_metrics(text)
    read_log(text)
    assert classify(text, exit_code=context.get("exit_code")).kind in FAILURE_KINDS


def feed(log: str | bytes, seed: int) -> None:
    for i, variant in enumerate(variants(log)):
        judge_everything(variant, CONTEXTS[(seed + i) % len(CONTEXTS)])


GENERATORS = {"format tokens": token_logs, "text and bytes": st.one_of(text_logs, byte_logs),
              "real lines shuffled and spliced": spliced_logs(), "ranks merged onto one line": merged_rank_logs(),
              "real records with hostile numbers": mutated_number_logs()}


@pytest.mark.parametrize("name", GENERATORS)
@FAST
@given(data=st.data())
def test_generated_logs(name, data):
    feed(data.draw(GENERATORS[name]), data.draw(st.integers(0, 100)))


# ---- the slow tier: three times the examples (840: 1,400 took 133 s of a loaded CI run), and bigger logs

@pytest.mark.slow
@SLOW
@given(st.one_of(token_logs, text_logs, byte_logs, spliced_logs(400), merged_rank_logs(300),
                 mutated_number_logs(300)), st.integers(0, 100))
def test_slow_tier_all_generators(log, seed):
    feed(log, seed)


@pytest.mark.slow
@settings(max_examples=6, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(["\n", "", " | ", "|"]), st.sampled_from(TOKENS), st.integers(0, 100))
def test_slow_tier_megabyte_logs(separator, token, seed):
    rng = random.Random(seed)
    log = separator.join(rng.choice(FIXTURE_LINES + [token * 1000]) for _ in range(20_000))
    judge_everything(log, CONTEXTS[seed % len(CONTEXTS)])
