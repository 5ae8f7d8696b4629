"""analysis.report.html: log excerpts, failure groups and the self-contained, escaped report.html."""

from __future__ import annotations

import base64
import re
from pathlib import Path

from analysis.report.html import (
    EXCERPT_LINES,
    ReportInput,
    best_excerpt,
    failure_groups,
    log_excerpt,
    read_tail,
    render_report,
    write_report,
)
from analysis.report.recommend import Recommendation

OOM = ("[rank1]: RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
       "memory: you tried to allocate 8388608 bytes.")


def trial(chash: str, state: str, kind: str = "", reason: str = "", log_paths=(), **metrics) -> dict:
    return {"config_hash": chash, "state": state, "failure_kind": kind, "reason": reason, "attempts": 1,
            "log_paths": list(log_paths), "metrics": metrics, "predicted": {"tokens_per_s": 900.0},
            "layout": {"gpus": 4, "nodes": 1, "tp": 2, "pp": 1, "dp": 2, "mbs": 1, "gbs": 8,
                       "recompute": "none"}}


def test_excerpt_centres_on_the_line_the_reason_quotes():
    lines = [f"[rank1]:   frame {i}" for i in range(100)]
    lines.insert(60, OOM)
    lines += ["submitit INFO (2026) - Exiting", "", "torchrun: ChildFailedError"] + [f"teardown {i}" for i in range(30)]
    excerpt = log_excerpt("\n".join(lines), f"out of memory: {OOM[:200]}...", "x.err")
    assert len(excerpt.lines) == EXCERPT_LINES
    assert excerpt.lines[excerpt.marked] == OOM
    assert excerpt.marked == EXCERPT_LINES - 6          # 5 lines of what followed are kept after it
    assert not any(ln.startswith("submitit INFO") for ln in excerpt.lines)


def test_excerpt_without_a_quoted_line_is_the_tail_without_noise():
    text = "\n".join([f"line {i}" for i in range(50)] + ["submitit INFO (2026) - Job completed", ""])
    excerpt = log_excerpt(text, "crashed: exit code 1")
    assert excerpt.marked is None and excerpt.lines == tuple(f"line {i}" for i in range(30, 50))


def test_best_excerpt_picks_the_file_holding_the_quoted_line(tmp_path):
    out, err = tmp_path / "1_0_log.out", tmp_path / "1_0_log.err"
    out.write_text("[parasweep] init done in 1.0 s\n")
    err.write_text("Traceback\n" + OOM + "\nmore\n")
    t = trial("a", "oom", "oom", f"out of memory: {OOM}", [str(out), str(err), str(tmp_path / "missing.log")])
    excerpt = best_excerpt(t, lambda p: read_tail(Path(p)))
    assert excerpt.source == "1_0_log.err" and excerpt.lines[excerpt.marked] == OOM
    assert read_tail(tmp_path / "missing.log") is None


def test_best_excerpt_centres_on_the_recorded_evidence_not_the_wrapper_traceback_at_the_end(tmp_path):
    # A job's .err ends with the wrappers' tracebacks, and a reason cut at both ends ("...ce fail at ...") quotes
    # no whole line: the excerpt is found from the evidence the judge recorded, in the file it names.
    out, err = tmp_path / "1_0_log.out", tmp_path / "1_0_log.err"
    out.write_text("submitit ERROR (2026) - Submitted job triggered an exception\n")
    wrappers = ["Traceback (most recent call last):", '  File "submitit/core/submission.py", line 55',
                "RuntimeError: trial script launch.sh exited with code 1"]
    err.write_text("\n".join([f"frame {i}" for i in range(40)] + [OOM] + [f"teardown {i}" for i in range(40)]
                             + wrappers) + "\n")
    t = {**trial("a", "oom", "oom", "out of memory (host): ...ce fail at alloc_cpu.cpp:127] err == 0. Defau...",
                 [str(out), str(err)]),
         "evidence": [{"file": "1_0_log.err", "line": 41, "text": OOM}]}
    excerpt = best_excerpt(t, lambda p: read_tail(Path(p)))
    assert excerpt.source == "1_0_log.err" and excerpt.lines[excerpt.marked] == OOM
    assert not any("trial script" in line for line in excerpt.lines)
    old = {**t, "evidence": []}  # a ledger from before evidence was recorded: the reason's quote, cut ends dropped
    assert best_excerpt(old, lambda p: read_tail(Path(p))).lines[excerpt.marked] == OOM


def test_read_tail_keeps_the_end_of_a_long_log(tmp_path):
    path = tmp_path / "big.log"
    path.write_text("x" * 5000 + "\nTHE END\n")
    assert read_tail(path, max_bytes=100).endswith("THE END\n") and len(read_tail(path, max_bytes=100)) == 100


def test_failure_groups_by_kind_largest_first():
    trials = [trial("a", "ok"), trial("b", "oom", "oom"), trial("c", "failed", "crashed"),
              trial("d", "oom", "oom"), trial("e", "pruned", reason="predicted_oom"), trial("f", "running")]
    groups = failure_groups(trials, lambda p: None)
    assert [(g.kind, [t["config_hash"] for t, _ in g.trials]) for g in groups] == [("oom", ["b", "d"]),
                                                                                   ("crashed", ["c"])]
    assert all(excerpt is None for g in groups for _, excerpt in g.trials)


def _report(tmp_path, **changes) -> str:
    png = tmp_path / "throughput_heatmap.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n fake image bytes")
    crashed = trial("c", "failed", "crashed", "crashed: ValueError: <script>alert(1)</script>", ["c.log"])
    best = trial("best0001", "ok", tokens_per_s=1000.0, peak_mem_gb=0.1, headroom=0.8)
    data = ReportInput("tiny", {"model": "tiny <b>", "trials": "2"}, [best], [best, crashed], plots=[png],
                       explanation="tp2 pp1 dp2 mbs1 gbs8 (best0001) is the only trial that finished ok",
                       recommendations=[Recommendation("grow_mbs", "info", "try mbs 2", "python -m launcher 'x'")],
                       failures=failure_groups([crashed], lambda p: "boom\n<script>alert('log')</script>\n"),
                       export_files={"launch.sh": "exec torchrun --flag \"$X\" && <tag>"},
                       links={"MLflow runs": "http://127.0.0.1:5000/#/experiments/1/runs"})
    for key, value in changes.items():
        setattr(data, key, value)
    return render_report(data)


def test_report_escapes_every_log_excerpt_and_reason(tmp_path):
    page = _report(tmp_path)
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(&#x27;log&#x27;)&lt;/script&gt;" in page        # the log excerpt, escaped
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page                      # the failure reason, escaped
    assert "tiny &lt;b&gt;" in page and "&lt;tag&gt;" in page


def test_report_is_self_contained(tmp_path):
    page = _report(tmp_path)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page.replace(
        'href="http://127.0.0.1:5000/#/experiments/1/runs"', ""))  # the MLflow link is the only URL
    assert "<link" not in page and "@import" not in page and "url(" not in page
    embedded = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert [base64.b64decode(x) for x in embedded] == [(tmp_path / "throughput_heatmap.png").read_bytes()]


def test_report_names_the_winner_and_shows_the_sections(tmp_path):
    page = _report(tmp_path)
    winner = re.search(r'<p id="winner-text">(.*?)</p>', page).group(1)
    assert "best0001" in winner
    assert re.search(r'<tr class="best"><td>1</td><td class="text">best0001</td>', page)
    for section in ("summary", "winner", "ranked", "plots", "failures", "pruned", "export"):
        assert f'<section id="{section}">' in page
    assert "python -m launcher &#x27;x&#x27;" in page and "launch.sh" in page


def test_report_without_ok_trials(tmp_path):
    page = _report(tmp_path, ranked=[], plots=[], export_files={}, explanation="No trial finished ok")
    assert "Nothing exported" in page and '<tr class="best">' not in page


def test_write_report_replaces_the_file_whole(tmp_path):
    path = tmp_path / "report.html"
    path.write_text("old")
    write_report(path, ReportInput("s", {}, [], []))
    assert path.read_text().startswith("<!DOCTYPE html>") and not list(tmp_path.glob("*.tmp"))


def test_summary_counts_states_and_measures_the_elapsed_time():
    from analysis.report.html import summary_rows

    trials = [dict(trial("a", "ok"), submitted_at=100.0, finished_at=130.0),
              dict(trial("b", "oom"), submitted_at=110.0, finished_at=170.0),
              dict(trial("c", "planned"), submitted_at=0.0, finished_at=0.0)]
    model = dict(name="tiny", layers=4, hidden=256, heads=4, seq_len=128)
    cluster = dict(name="local-cpu", gpu="cpu", gpu_mem_gb=0.5, gpus_per_node=8, nodes=1, partition="debug")
    backend = dict(name="torch", precision="fp32", warmup_iters=2, measure_iters=4)
    rows = summary_rows(model, cluster, backend, "local", trials, 0.02)
    assert rows["trials"] == "3: ok 1, oom 1, planned 1"
    assert rows["elapsed"].startswith("70 s from the first submission") and "90 s of trial time" in rows["elapsed"]


def test_the_search_section_shows_run_order_calibration_early_stops_and_skips(tmp_path):
    best = {**trial("best0001", "ok", tokens_per_s=1000.0), "submitted_at": 0.0, "finished_at": 900.0,
            "calibrated": {"tokens_per_s": 950.0}}
    slow = {**trial("slow0002", "stopped_early", reason="400 tokens/s after 3 measured iterations, more than 2% "
                    "below the best", tokens_per_s=400.0), "submitted_at": 900.0, "finished_at": 1000.0}
    skip = {**trial("skip0003", "pruned", reason="predicted 300 tokens/s: 0.1% chance"), "pruned_by": "converged",
            "attempts": 0}
    calibration = {"applied": True, "n_trials": 3, "note": "fitted on 3 measured trials", "residual_sd": 0.05,
                   "memory_residual_sd": 0.02, "n_holdout": 1, "holdout_error": 0.04,
                   "parameters": {"compute": 0.8, "network": 1.0}, "parameter_sd": {"compute": 0.1, "network": 0.7},
                   "supported": ["compute"]}
    page = _report(tmp_path, trials=[best, slow, skip], failures=failure_groups([slow], lambda p: None),
                   calibration=calibration, network="netbench gloo on local-cpu: intra-node 2.1 (datasheet 5)")
    section = re.search(r'<section id="search">(.*?)</section>', page, re.S).group(1)
    assert "Network probe" in section and "intra-node 2.1 (datasheet 5)" in section
    assert section.index("best0001") < section.index("slow0002")                    # in the order they ran
    assert "<td>950</td>" in section and "<td>-5%</td>" in section                  # calibrated before it ran
    assert "<td>1</td>" in section and "x0.8" in section and "median |error| 4.0%" in section
    assert "Stopped early (1)" in section and "400 tokens/s after 3 measured" in section
    assert "Skipped while the sweep ran (1)" in section and "converged" in section
    assert "slow0002" not in re.search(r'<section id="failures">(.*?)</section>', page, re.S).group(1)


def test_the_report_shows_the_intervals_and_what_the_calibration_brought_back(tmp_path):
    apriori = {"tokens_per_s": 900.0, "tokens_per_s_low": 800.0, "tokens_per_s_high": 1000.0, "peak_mem_gb": 0.61,
               "peak_mem_gb_low": 0.545, "peak_mem_gb_high": 0.656}
    back = {**trial("back0001", "ok", tokens_per_s=950.0, peak_mem_gb=0.35), "selection": "brought_back",
            "predicted": apriori, "submitted_at": 0.0, "finished_at": 60.0,
            "calibrated": {"tokens_per_s": 940.0, "step_time_s": 1.0, "step_sd": 0.1, "peak_mem_gb": 0.33,
                           "mem_sd": 0.05}}
    pruned = {**trial("gone0002", "pruned", reason="predicted 0.9 GB (90 % interval 0.8–0.97): even ..."),
              "pruned_by": "predicted_oom", "attempts": 0, "predicted": {**apriori, "peak_mem_gb": 0.9,
                                                                         "peak_mem_gb_low": 0.8,
                                                                         "peak_mem_gb_high": 0.97}}
    page = _report(tmp_path, trials=[back, pruned], ranked=[back])
    search = re.search(r'<section id="search">(.*?)</section>', page, re.S).group(1)
    assert "Brought back after calibration (1)" in search
    brought = search[search.index("Brought back"):search.index("Skipped while")]
    assert "back0001" in brought and "0.61 (0.545–0.656)" in brought and "0.33 (0.304–0.358)" in brought
    assert "<td>900 (800–1,000)</td>" in search                                 # a-priori tokens/s, 90 %
    assert "900 (800–1,000)" in re.search(r'<section id="ranked">(.*?)</section>', page, re.S).group(1)
    assert "0.9 (0.8–0.97)" in re.search(r'<section id="pruned">(.*?)</section>', page, re.S).group(1)
