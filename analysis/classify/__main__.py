"""`python -m analysis.classify LOG...`: why did this job end? For any job log, from any framework.

Prints, per log, the kind (ok, oom, comm_error, ...), the reason, the evidence (line numbers and lines) and, when
the log has iterations or final speed metrics, the steady-state step time, throughput, TFLOPs and peak memory.
Works on a log alone; --exit-code and --slurm-state (sacct's State) sharpen the verdict when known.
Exit status: 0 whatever the verdicts; 2 for a usage error or a file that cannot be read (one line on stderr).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from analysis.logs.logtext import normalize
from analysis.logs.outcome import Outcome, measurements, trial_outcome
from analysis.report import strict_json
from launcher.core.names import BackendName

EXAMPLES = """\
examples:
  python -m analysis.classify slurm-4242.out
  python -m analysis.classify logs/*.log --exit-code 1 --slurm-state FAILED
  python -m analysis.classify sweeps/tiny/jobs/1234/1234_0_log.err --backend torch --json | jq .kind
"""
JSON_KEYS = ("file", "kind", "reason", "evidence_lines", "step_time_s", "tokens_per_s", "tflops_per_gpu",
             "peak_mem_gb")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m analysis.classify", description=__doc__.splitlines()[0],
                                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("logs", nargs="+", metavar="LOG", type=Path, help="job log file(s), any framework")
    p.add_argument("--exit-code", type=int, default=None, help="the job's exit code, when known")
    p.add_argument("--slurm-state", default=None, metavar="STATE",
                   help="the job's SLURM state (sacct State: COMPLETED, FAILED, TIMEOUT, OUT_OF_MEMORY, ...)")
    p.add_argument("--backend", default="auto", metavar="NAME",
                   help="torch (the embedded workload's result line), megatron_lm, megatron_deepspeed, or auto "
                        "(default: recognise the format)")
    p.add_argument("--tokens-per-step", type=int, default=None, metavar="N",
                   help="global batch x sequence length, for tokens/s when the log does not print them")
    p.add_argument("--capacity-gb", type=float, default=None, metavar="GB",
                   help="device memory, to flag a peak above it as an impossible measurement")
    p.add_argument("--peak-tflops", type=float, default=None, metavar="T",
                   help="per-GPU peak TFLOP/s, to flag a rate above it as an impossible measurement")
    p.add_argument("--json", action="store_true", help="one JSON object per log, one per line")
    return p


def _figures(metrics: dict) -> dict:
    return {key: metrics.get(key) for key in ("step_time_s", "tokens_per_s", "tflops_per_gpu", "peak_mem_gb")}


def _as_json(path: Path, outcome: Outcome, metrics: dict) -> str:
    row = {"file": str(path), "kind": outcome.failure_kind, "reason": outcome.reason,
           "evidence_lines": [{"line": n, "text": text} for n, text in outcome.evidence], **_figures(metrics)}
    return strict_json.dumps({k: row[k] for k in JSON_KEYS})


def _fmt(value: float | None, spec: str, unit: str) -> str | None:
    return None if value is None else f"{value:{spec}}{unit}"


def _as_text(path: Path, outcome: Outcome, metrics: dict, n_iterations: int) -> str:
    lines = [f"{path}: {outcome.failure_kind}", f"  reason:   {outcome.reason}"]
    for n, text in outcome.evidence:
        lines.append(f"  evidence: line {n}: {text}")
    if outcome.log_format:
        what = f"{n_iterations} iterations" if n_iterations else "final metrics"
        lines.append(f"  format:   {outcome.log_format} ({what})")
    figures = _figures(strict_json.finite(metrics))
    if figures["step_time_s"] is not None:
        used = metrics.get("n_measured")
        parts = [str(_fmt(figures["step_time_s"], ".4g", " s/step")) + (f" (median of {used} steady steps)" if used
                                                                    else ""),
                 _fmt(figures["tokens_per_s"], ",.0f", " tokens/s"),
                 _fmt(figures["tflops_per_gpu"], ".1f", " TFLOP/s/GPU"),
                 _fmt(figures["peak_mem_gb"], ".2f", " GB peak memory")]
        lines.append("  measured: " + "; ".join(p for p in parts if p))
    elif figures["peak_mem_gb"] is not None:
        lines.append(f"  measured: {figures['peak_mem_gb']:.2f} GB peak memory")
    for note in outcome.notes[:5]:
        lines.append(f"  note:     {note}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # a usage error exits 2 with argparse's one-line message
    status = 0
    for path in args.logs:
        try:
            data = path.read_bytes()
        except OSError as exc:
            print(f"error: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
            status = 2
            continue
        log_format = "workload" if args.backend in (BackendName.torch, "workload") else "auto"
        outcome = trial_outcome(data, log_format=log_format, capacity_gb=args.capacity_gb,
                                tokens_per_step=args.tokens_per_step, peak_tflops=args.peak_tflops,
                                slurm_state=args.slurm_state, exit_code=args.exit_code)
        try:
            metrics, _, reading = measurements(normalize(data), log_format=log_format,
                                                     capacity_gb=args.capacity_gb,
                                                     tokens_per_step=args.tokens_per_step)
            n_iterations = len(reading.iterations)
        except Exception:  # noqa: BLE001 - trial_outcome already reported a failure to judge in its reason
            metrics, n_iterations = {}, 0
        print(_as_json(path, outcome, metrics) if args.json
              else _as_text(path, outcome, metrics, n_iterations), flush=True)
    return status


def _run() -> int:
    try:
        return main()
    except BrokenPipeError:  # `... | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(_run())
