"""End of a sweep: rank the trials, write best.json with the winner's command, finish the MLflow parent run."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Optional

from launcher.layout import Layout
from launcher.ledger import Ledger, TrialRecord
from launcher.schema import RootConfig
from launcher.tracking_link import TrackingLink


TOP_PRINTED = 30


def best_payload(cfg: RootConfig, folder: Path, best: TrialRecord, ranked_entry: Optional[dict] = None) -> dict:
    """The winner: its configuration, what was measured (the median over repeats when it was repeated), what was
    predicted, and the exact command that runs it."""
    from launcher.backends import launch_command
    from launcher.trial_files import spec_for, trial_dir

    spec = spec_for(cfg, best.layout, trial_dir(folder, best.config_hash))
    return {"sweep": cfg.sweep.name, "config_hash": best.config_hash, "model": cfg.model.name,
            "cluster": cfg.cluster.name, "backend": cfg.backend.name, "layout": best.layout,
            "measured": (ranked_entry or {}).get("metrics", best.metrics), "n_runs": (ranked_entry or {}).get("n_runs", 1),
            "predicted": best.predicted, "command": launch_command(spec),
            "launch_script": str(trial_dir(folder, best.config_hash) / "launch.sh"),
            "mlflow_run_id": best.mlflow_run_id}


def write_best(cfg: RootConfig, folder: Path, best: Optional[TrialRecord],
               ranked_entry: Optional[dict] = None) -> Optional[Path]:
    path = folder / "best.json"
    if best is None:
        path.unlink(missing_ok=True)
        return None
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(best_payload(cfg, folder, best, ranked_entry), indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


def print_results(cfg: RootConfig, ranked: list[dict], records: list[TrialRecord], folder: Path) -> None:
    """The ranked table (top TOP_PRINTED rows: a 1,000-trial table takes seconds to lay out and nobody reads it),
    then what did not finish ok."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 160)  # no 80-column wrap in CI logs and pipes
    table = Table(title=f"sweep {cfg.sweep.name}: ok trials, best first")
    repeated = any(t.get("n_runs", 1) > 1 for t in ranked)
    for col in ("#", "trial", "layout", "tokens/s", "TFLOPs/GPU", "MFU", "peak GB", "headroom", "pred tok/s"):
        table.add_column(col, justify="left" if col in ("trial", "layout") else "right")
    for i, t in enumerate(ranked[:TOP_PRINTED], 1):
        m, p, lay = t["metrics"], t["predicted"], t["layout"]
        tokens = f"{m.get('tokens_per_s', 0):,.0f}"
        if repeated and t.get("n_runs", 1) > 1:  # median of n runs, with the spread
            tokens += f" ±{m.get('tokens_per_s_spread', 0) / 2:.0%} (n={t['n_runs']})"
        table.add_row(str(i), t["config_hash"][:8], Layout.label(lay), tokens,
                      f"{m.get('tflops_per_gpu') or 0:.3g}", f"{m.get('mfu') or 0:.1%}",
                      f"{m.get('peak_mem_gb') or 0:.2f}", f"{m.get('headroom') or 0:.0%}",
                      f"{p.get('tokens_per_s', 0):,.0f}")
    console.print(table)
    if len(ranked) > TOP_PRINTED:
        console.print(f"... and {len(ranked) - TOP_PRINTED} more ok trials: all of them in {folder / 'report.html'}")
    failed = [r for r in records if r.state not in ("ok", "pruned")]
    if failed:
        console.print("not ok: " + ", ".join(f"{r.config_hash[:8]} {r.state}"
                                             f"{'/' + r.failure_kind if r.failure_kind else ''}" for r in failed))
    counts = Counter(r.state for r in records)
    console.print("trials by state: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))



def conclude(cfg: RootConfig, folder: Path, ledger: Ledger, tracking: TrackingLink, *, summary: dict,
             train_iters: Optional[int] = None, resolve=None) -> Optional[TrialRecord]:
    """The end of a sweep, and of every `python -m analysis`: rank (medians over repeats), write best.json, print
    the results, write plots/report.html/export/, attach them to the parent run and, once no trial is live, finish
    it. Returns the winner (None without an ok trial)."""
    from analysis.select import group_repeats, rank
    from launcher.outputs import DEFAULT_TRAIN_ITERS, attach_outputs, print_outputs, write_analysis

    records = ledger.trials()
    ranked = rank(group_repeats([asdict(r) for r in records]), cfg.analysis.noise_tolerance)
    best = ledger.get(ranked[0]["config_hash"]) if ranked else None
    best_path = write_best(cfg, folder, best, ranked[0] if ranked else None)
    print_results(cfg, ranked, records, folder)
    if best is not None:
        print(f"best: {best.config_hash} {Layout.label(best.layout)} — {ranked[0]['metrics'].get('tokens_per_s', 0):,.0f} "
              f"tokens/s; command in {best_path}")
    else:
        print("no trial finished ok: nothing to select (see the failures above)")
    started = time.perf_counter()
    outputs = write_analysis(cfg, folder, [asdict(r) for r in records], train_iters=train_iters or DEFAULT_TRAIN_ITERS,
                             runs_url=ledger.get_meta("mlflow_runs_url", "") or "", resolve=resolve)
    print_outputs(outputs, folder)
    print(f"plots, report and export in {time.perf_counter() - started:.2f} s")
    if tracking.active:
        try:
            attach_outputs(tracking.tracker, tracking.parent_id, outputs)
        except Exception as exc:  # the store went away: the files are in the folder, python -m analysis attaches
            tracking.lost(exc)
    if any(r.is_live for r in records):  # a launcher is still at work: it finishes the parent run itself
        url = tracking.runs_url
    else:
        summary = {**summary, "trials_ok": sum(r.state == "ok" for r in records), "trials_total": len(records)}
        if ranked:
            summary["best_tokens_per_s"] = ranked[0]["metrics"].get("tokens_per_s", 0.0)
        url = tracking.finish(best, summary, [p for p in (folder / "plan.csv", best_path, folder / "config.yaml")
                                              if p and p.exists()])
    if url:
        print(f"MLflow runs: {url}")
    return best


def finish_sweep(cfg: RootConfig, folder: Path, ledger: Ledger, tracking: TrackingLink, elapsed_s: float) -> int:
    tracking.sync_pending()
    best = conclude(cfg, folder, ledger, tracking, summary={"elapsed_s": elapsed_s})
    return 0 if best is not None else 1
