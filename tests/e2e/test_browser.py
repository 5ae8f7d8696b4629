"""The MLflow dashboard and report.html of a real tiny sweep, checked in headless Chromium.

Uses the session's tiny sweep (conftest `tiny_sweep`), runs `python -m analysis sweeps/tiny` on it (plots, report,
export, attachments to the parent run), starts the MLflow UI with the very command the launcher printed (its port
swapped for a free one, one worker for this 2-core machine) and drives Debian's /usr/bin/chromium through
playwright, in a 1600 x 1000 window (a reviewer's). The launcher prints the configured tracking.ui_url
(http://127.0.0.1:5000/#/experiments/<id>/runs?workflowType=machine_learning&viewStateShareKey=<key>); the test
keeps that link's path, fragment and query and swaps in its own server's host:port. Screenshots land in
test-artifacts/browser/ (git-ignored).

Skipped only when chromium or playwright is missing and PARASWEEP_REQUIRE_BROWSER is unset; with it set, a
missing browser fails. Never runs `playwright install`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from analysis.report.tracking import VIEW_METRICS, VIEW_TAGS, VIEW_WIDTH_PX

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "test-artifacts" / "browser"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
SERVER_START_S = 240   # `mlflow server` needs ~17 s on an idle 2-core machine; much more under load
# MLflow 3 (3.17 here) starts a job runner beside the server unless told not to; nothing here submits MLflow jobs.
UI_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
UI_WAIT_MS = 60_000


def _missing() -> str:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed"
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is missing"
    return ""


MISSING = _missing()
if MISSING and not os.environ.get("PARASWEEP_REQUIRE_BROWSER"):
    pytest.skip(f"{MISSING} (set PARASWEEP_REQUIRE_BROWSER=1 to make this a failure)", allow_module_level=True)


@pytest.fixture(scope="module")
def browser():
    if MISSING:  # PARASWEEP_REQUIRE_BROWSER is set: fail before the tiny sweep runs
        pytest.fail(f"{MISSING}, but PARASWEEP_REQUIRE_BROWSER is set")
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def sweep(browser, request):
    """(workdir, launcher stdout): the session's tiny sweep after `python -m analysis sweeps/tiny`."""
    work, proc = request.getfixturevalue("tiny_sweep")  # after the browser check: no 3-minute sweep to skip
    analysis = subprocess.run([sys.executable, "-m", "analysis", "sweeps/tiny"], cwd=work, capture_output=True,
                              text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert analysis.returncode == 0, analysis.stdout[-2000:] + analysis.stderr[-2000:]
    return work, proc.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(base: str) -> bool:
    try:
        return urllib.request.urlopen(f"{base}/health", timeout=2).status == 200
    except OSError:
        return False


def _ui_command(launcher_stdout: str, port: int) -> list[str]:
    """The printed `mlflow ui ...` command, with its port swapped for `port`."""
    printed = re.search(r"start the MLflow UI first: (.+)\)$", launcher_stdout, re.MULTILINE)
    assert printed, "the launcher did not print the command that starts the MLflow UI"
    args = shlex.split(printed.group(1))
    assert args[args.index("--port") + 1] == "5000"  # tracking.ui_url's port
    args[args.index("--port") + 1] = str(port)
    return args + ["--workers", "1"]


@pytest.fixture(scope="module")
def mlflow_ui(sweep, tmp_path_factory):
    """The printed `mlflow ui` command, started from another directory (the store's path is absolute); runs'
    artifacts are served from their absolute file:// URIs (the experiment's artifact_location beside the db, see
    analysis/report/tracking.py). Always stopped at teardown."""
    _, stdout = sweep
    port = _free_port()
    log = (SHOTS / "mlflow-server.log").open("w")
    # MLflow's job runner (five huey consumer processes, each importing mlflow) serves none of the pages checked
    # here and competes with the server's start-up for the 2 cores of the CI machine: off, as in UI_ENV.
    server = subprocess.Popen(_ui_command(stdout, port), cwd=tmp_path_factory.mktemp("elsewhere"), stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **UI_ENV})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + SERVER_START_S
        while not _healthy(base):
            assert server.poll() is None, f"mlflow server exited: see {SHOTS / 'mlflow-server.log'}"
            assert time.time() < deadline, f"mlflow server not up after {SERVER_START_S} s"
            time.sleep(1)
        yield base
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the server and its worker: the group this test started
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": VIEW_WIDTH_PX, "height": 1000})
    tab = context.new_page()
    tab.set_default_timeout(UI_WAIT_MS)
    yield tab
    context.close()


def _ledger(work: Path) -> tuple[list[dict], dict]:
    db = sqlite3.connect(work / "sweeps" / "tiny" / "ledger.sqlite")
    db.row_factory = sqlite3.Row
    trials = [dict(r) for r in db.execute("SELECT * FROM trials ORDER BY position")]
    meta = {r["key"]: r["value"] for r in db.execute("SELECT key, value FROM meta")}
    db.close()
    return trials, meta


def _runs_url(launcher_stdout: str, base: str) -> str:
    printed = re.search(r"MLflow runs: (http://[^/\s]+)(/#/experiments/\d+/runs\?workflowType=machine_learning"
                        r"&viewStateShareKey=\S+)", launcher_stdout)
    assert printed, "the launcher did not print the MLflow runs link (with its saved view)"
    return base + printed.group(2)


def _close_assistant(page) -> None:
    """MLflow 3.x opens an assistant side panel that hides the right-hand columns in screenshots."""
    close = page.locator('button[data-component-id="mlflow.assistant.chat_panel.close"]')
    if close.count():
        close.first.click()


ROWS_JS = """() => {
  const rows = {};
  for (const cell of document.querySelectorAll('.ag-row .ag-cell')) {
    const index = cell.closest('.ag-row').getAttribute('row-index');
    (rows[index] ||= {})[cell.getAttribute('col-id')] = cell.innerText.trim();
  }
  return Object.values(rows);
}"""


def _table_rows(page) -> list[dict]:
    """One {column id: text} per grid row (ag-grid splits a row over its pinned and scrolling containers)."""
    return page.evaluate(ROWS_JS)


def _layout(row: dict) -> dict:
    """A trial's layout from its ledger row (one column per layout dimension)."""
    from launcher.core.layout import DIMENSIONS

    return {d.name: d.type(row[d.name]) for d in DIMENSIONS}


def _number(text: str) -> float | None:
    return float(text) if re.fullmatch(r"-?[\d.]+(e-?\d+)?", text) else None


HEADERS_JS = """() => Array.from(document.querySelectorAll('.ag-header-cell')).map(h => {
  const box = h.getBoundingClientRect();
  return {id: h.getAttribute('col-id'), text: h.innerText.trim(), left: box.left, right: box.right};
})"""


def test_the_printed_link_shows_every_run_with_its_metrics_best_first_and_the_winner_starred(sweep, mlflow_ui,
                                                                                           page):
    """The reviewer's window (1600 x 1000, a fresh browser: MLflow's own default is its GenAI navigation): the
    printed link alone opens the Model training navigation and the sweep's view, with the winner, tokens/s, tokens/s
    per GPU, MFU %, peak GB, headroom %, status and failure kind all on screen without scrolling."""
    from analysis.report.tracking import run_label

    work, stdout = sweep
    trials, _ = _ledger(work)
    best = json.loads((work / "sweeps" / "tiny" / "best.json").read_text())
    ran = [t for t in trials if t["pruned_by"] != "predicted_oom"]
    labels = {t["config_hash"]: run_label(_layout(t), repeat=bool(t["repeat_of"])) for t in ran}  # Layout.label
    page.goto(_runs_url(stdout, mlflow_ui))
    page.get_by_text("sweep tiny", exact=True).wait_for()
    page.locator(".ag-header-cell[col-id='metrics.`tokens_per_s`']").wait_for()  # the view's columns, no clicks
    _close_assistant(page)
    page.wait_for_timeout(1000)  # column widths settle, for the screenshot only
    page.screenshot(path=str(SHOTS / "mlflow-runs-table.png"))  # the window as the person sees it
    nav = page.locator("aside").first.inner_text().split("\n")
    assert {"Runs", "Models"} <= set(nav) and not {"Evaluation", "Evaluation runs", "Judges"} & set(nav), nav
    headers = {h["id"]: h for h in page.evaluate(HEADERS_JS)}
    grid = page.locator(".ag-root-wrapper").first.bounding_box()
    grid_right = grid["x"] + grid["width"]  # the table's own edge (it clips its columns), inside the window's
    view = [f"metrics.`{m}`" for m in VIEW_METRICS] + [f"tags.`{t}`" for t in VIEW_TAGS]
    assert "attributes.`Run Name`" in headers and set(view) <= set(headers), sorted(headers)
    for column in ["attributes.`Run Name`", *view]:
        h = headers[column]
        assert 0 <= h["left"] < h["right"] <= min(grid_right, VIEW_WIDTH_PX), h  # on screen, no scrolling
        assert column == "attributes.`Run Name`" or h["text"] == column.split("`")[1], h  # the whole name shown
    rows = _table_rows(page)
    names = [r["attributes.`Run Name`"].split("\n")[-1] for r in rows]
    assert names.count("sweep tiny") == 1 and len(rows) == len(ran) + 1, names
    # The winner is starred; it is the first row unless the finalists' repeats (analysis.confirm_top) put a single
    # luckier measurement of another layout above its median.
    assert [n for n in names if n.startswith("\u2605")] == ["\u2605 " + labels[best["config_hash"]]]
    if best.get("n_runs", 1) == 1:
        assert names[0].startswith("\u2605")
    assert sorted(n.removeprefix("\u2605 ") for n in names if n != "sweep tiny") == sorted(labels.values())
    measured = [_number(r["metrics.`tokens_per_s`"]) for r in rows]
    ok = [m for m in measured if m is not None]
    assert ok == sorted(ok, reverse=True) and len(ok) == sum(t["state"] == "ok" for t in ran)
    singles = [json.loads(t["metrics"])["tokens_per_s"] for t in ran if t["state"] == "ok"]
    assert ok[0] == pytest.approx(max(singles), rel=1e-5)  # each run shows its own measurement, best first
    children = {n.removeprefix("\u2605 "): r for r, n in zip(rows, names) if n != "sweep tiny"}
    for t in ran:
        row, metrics = children[labels[t["config_hash"]]], json.loads(t["metrics"] or "{}")
        assert row["tags.`status`"] == t["state"]
        if t["state"] == "ok":  # no 'ok' failure kind; fractions shown as percentages
            assert row["tags.`failure_kind`"] in ("", "-"), row
            assert _number(row["metrics.`mfu_pct`"]) == pytest.approx(100 * metrics["mfu"], rel=1e-5)
            assert _number(row["metrics.`headroom_pct`"]) == pytest.approx(100 * metrics["headroom"], rel=1e-5)
        else:
            assert row["tags.`failure_kind`"] == t["failure_kind"], row
    assert all(len(n) <= 26 for n in names)  # fits the 230-pixel name column without an ellipsis


def test_child_run_page_shows_params_metrics_and_the_log(sweep, mlflow_ui, page):
    work, stdout = sweep
    trials, meta = _ledger(work)
    exp = meta["mlflow_experiment_id"]
    best = json.loads((work / "sweeps" / "tiny" / "best.json").read_text())
    winner = next(t for t in trials if t["config_hash"] == best["config_hash"])
    page.goto(f"{mlflow_ui}/#/experiments/{exp}/runs/{winner['mlflow_run_id']}")
    page.get_by_text("Parameters (").wait_for()
    _close_assistant(page)
    text = page.inner_text("body")
    page.screenshot(path=str(SHOTS / "mlflow-child-run.png"), full_page=True)
    metrics, layout = json.loads(winner["metrics"]), winner  # one ledger column per layout dimension
    shown = repr(float(f"{metrics['tokens_per_s']:.6g}"))  # logged to 6 significant digits
    # the page writes a whole number as JavaScript does (5878, not 5878.0: the run of 28 Nov 06:00 failed on it)
    assert re.search(rf"tokens_per_s\s+{re.escape(shown.removesuffix('.0'))}(\.0)?(?![\d.])", text), shown
    assert "Best trial of sweep tiny" in text  # the winner's description
    assert re.search(r"predicted_tokens_per_s\s+[\d.]+", text)
    headroom = re.search(r"headroom_pct\s+([\d.]+)", text)  # a percentage, not the ledger's fraction
    assert headroom and float(headroom.group(1)) == pytest.approx(100 * metrics["headroom"], rel=1e-5)
    for param in ("tp", "pp", "dp", "mbs", "gbs"):
        assert re.search(rf"\n{param}\s+{layout[param]}\n", text), param
    assert re.search(rf"config_hash\s+{winner['config_hash']}", text) and "Finished" in text

    oom = next(t for t in trials if t["state"] == "oom")  # the real allocator failure: its log is the evidence
    err_log = next(Path(p).name for p in json.loads(oom["log_paths"]) if p.endswith(".err")) + ".log"
    page.goto(f"{mlflow_ui}/#/experiments/{exp}/runs/{oom['mlflow_run_id']}/artifacts")
    for name in ("launch.sh", "trial.json"):
        page.get_by_text(name, exact=True).first.wait_for()
    page.get_by_text("logs", exact=True).first.click()  # job logs are uploaded as logs/<file>.log (previewable)
    for name in [Path(p).name + ".log" for p in json.loads(oom["log_paths"])]:
        page.get_by_text(name, exact=True).first.wait_for()
    page.get_by_text(err_log, exact=True).first.click()
    page.get_by_text("DefaultCPUAllocator: can't allocate memory").first.wait_for()  # the preview of the log
    page.screenshot(path=str(SHOTS / "mlflow-child-log.png"), full_page=True)


def test_parent_run_has_the_plots_and_the_report(sweep, mlflow_ui, page):
    work, _ = sweep
    _, meta = _ledger(work)
    page.goto(f"{mlflow_ui}/#/experiments/{meta['mlflow_experiment_id']}/runs/{meta['mlflow_parent_run_id']}"
              "/artifacts")
    page.get_by_text("plots", exact=True).first.wait_for()
    _close_assistant(page)
    page.get_by_text("plots", exact=True).first.click()
    page.get_by_text("throughput_heatmap.png", exact=True).first.click()
    image = page.locator("img[src^='blob:']").first  # the preview: a blob: URL of the downloaded artifact
    image.wait_for()
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image.element_handle())
    png = (work / "sweeps" / "tiny" / "plots" / "throughput_heatmap.png").read_bytes()
    assert image.evaluate("img => img.naturalWidth") == int.from_bytes(png[16:20], "big")  # IHDR width
    page.screenshot(path=str(SHOTS / "mlflow-parent-plots.png"), full_page=True)
    page.get_by_text("report", exact=True).first.click()
    page.get_by_text("report.html", exact=True).first.wait_for()
    page.get_by_text("train.sbatch", exact=True).first.wait_for()
    page.wait_for_timeout(500)  # the tree's expand animation, for the screenshot only
    page.screenshot(path=str(SHOTS / "mlflow-parent-report.png"), full_page=True)


def test_report_html_loads_every_plot_and_names_the_winner(sweep, page):
    work, _ = sweep
    folder = work / "sweeps" / "tiny"
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto((folder / "report.html").as_uri())
    page.wait_for_load_state("load")
    images = page.evaluate("Array.from(document.images).map(i => [i.alt, i.complete, i.naturalWidth])")
    page.screenshot(path=str(SHOTS / "report.png"), full_page=True)
    assert len(images) == len(list((folder / "plots").glob("*.png"))) == 7   # 5 + search progress, calibration
    assert all(complete and width > 0 for _, complete, width in images), images
    assert errors == []
    best = json.loads((folder / "best.json").read_text())
    assert best["config_hash"][:8] in page.inner_text("#winner-text")
    assert page.locator("#ranked tr.best td").nth(1).inner_text() == best["config_hash"]
    assert "train.sbatch" in page.inner_text("#export")
