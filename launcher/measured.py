"""Tables of measured configurations (the replay benchmark's input), read into requests and outcomes.

CSV, one row per configuration: the keys of `python -m launcher.estimate` (model shape, `gpu` preset, `n_gpus`,
layout, optional `precision`, `flash_attention`, `backend`), plus `state` (`ok` or `oom`), `step_time_s` (needed
for ok rows) and optionally `peak_mem_gb`. Lines starting with '#' are comments (a table's SOURCE line). Rows
with the same model, gpu and n_gpus form one sweep; an optional `sweep` column splits further (the same model
measured with two software stacks is two sweeps).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from launcher.config.load import load_saved
from launcher.core.errors import ParasweepError
from launcher.core.layout import NAMES, WORLD, Layout
from launcher.core.states import TrialState
from launcher.estimate import FIELD_TYPES, LineError, Request, request_from_fields
from launcher.run.ledger import Ledger

STATES = (TrialState.OK, TrialState.OOM)
"""What a row of a measured table can say: it ran and measured, or it ran out of memory."""
OUTCOME_KEYS = ("state", "step_time_s", "peak_mem_gb", "sweep")
_MODEL_KEYS = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "swiglu", "seq_len", "vocab", "max_position",
               "tied_embeddings", "norm")


class TableError(ParasweepError):
    """A measured table cannot be read: the message names the file, the line and the field."""


@dataclass(frozen=True)
class MeasuredRow:
    """One configuration and its measured outcome."""

    request: Request
    state: TrialState                 # ok / oom
    step_time_s: Optional[float]
    peak_mem_gb: Optional[float]
    line: int

    @property
    def tokens_per_step(self) -> int:
        return self.request.layout.gbs * self.request.model.seq_len

    @property
    def tokens_per_s(self) -> Optional[float]:
        return self.tokens_per_step / self.step_time_s if self.state is TrialState.OK and self.step_time_s else None

    @property
    def gpus(self) -> int:
        return self.request.layout.gpus


@dataclass(frozen=True)
class MeasuredSweep:
    name: str
    rows: tuple[MeasuredRow, ...]
    source_id: str = ""
    """The table's `# SOURCE_ID:` (which source measured it; '' when the table names none): the replay uses it to
    predict with constants fitted without that source (launcher.replay.prior_for)."""


def _typed(key: str, text: str, where: str):
    text = text.strip()
    if text == "":
        return None
    kind = FIELD_TYPES.get(key)
    try:
        if kind == "int":
            return int(text)
        if kind == "bool":
            if text.lower() not in ("true", "false", "1", "0"):
                raise ValueError(text)
            return text.lower() in ("true", "1")
        if key in ("step_time_s", "peak_mem_gb"):
            value = float(text)
            if not value > 0:
                raise ValueError(text)
            return value
    except ValueError:
        raise TableError(f"{where}: {key}={text!r} is not a valid {kind or 'positive number'}") from None
    return text


def parse_row(raw: dict, where: str, line: int) -> tuple[MeasuredRow, str]:
    """One CSV row -> (MeasuredRow, sweep key). Raises TableError naming the line and the field."""
    values = {k: _typed(k, v or "", where) for k, v in raw.items() if k is not None}
    outcome = {k: values.pop(k, None) for k in OUTCOME_KEYS}
    if outcome["state"] not in STATES:
        raise TableError(f"{where}: state={outcome['state']!r}: use one of {', '.join(STATES)}")
    state = TrialState(outcome["state"])
    if state is TrialState.OK and outcome["step_time_s"] is None:
        raise TableError(f"{where}: an ok row needs step_time_s")
    try:
        request = request_from_fields(values)
    except LineError as exc:
        raise TableError(f"{where}: {exc}") from None
    model_key = tuple(values.get(k) for k in _MODEL_KEYS)
    key = f"{outcome['sweep'] or ''}|{model_key}|{values['gpu']}|{values['n_gpus']}"
    return MeasuredRow(request, state, outcome["step_time_s"], outcome["peak_mem_gb"], line), key


def read_rows(lines: Iterable[str], source: str = "<table>") -> list[MeasuredSweep]:
    """The sweeps of a measured table, in order of first appearance. One row per line (no quoted newlines)."""
    lines = list(lines)
    source_id = next((text.split(":", 1)[1].strip() for text in lines if text.lstrip().startswith("# SOURCE_ID:")), "")
    numbered = [(i, text) for i, text in enumerate(lines, 1) if text.strip() and not text.lstrip().startswith("#")]
    if not numbered:
        raise TableError(f"{source}: no rows")
    header = _fields(numbered[0][1], f"{source}:{numbered[0][0]}")
    sweeps: dict[str, list[MeasuredRow]] = {}
    names: dict[str, str] = {}
    for line, text in numbered[1:]:
        where = f"{source}:{line}"
        values = _fields(text, where)
        if len(values) != len(header):
            raise TableError(f"{where}: {len(values)} fields, the header has {len(header)}")
        raw = dict(zip(header, values))
        row, key = parse_row(raw, where, line)
        sweeps.setdefault(key, []).append(row)
        names.setdefault(key, (raw.get("sweep") or "").strip() or _default_name(row))
    taken = list(names.values())
    return [MeasuredSweep(names[k] if taken.count(names[k]) == 1 else f"{names[k]}-{rows[0].gpus}gpu", tuple(rows),
                          source_id) for k, rows in sweeps.items()]


def _fields(text: str, where: str) -> list[str]:
    try:
        return next(csv.reader([text]))
    except (csv.Error, StopIteration) as exc:
        raise TableError(f"{where}: not a CSV line ({exc})") from None


def _default_name(row: MeasuredRow) -> str:
    m = row.request.model
    return f"{m.layers}x{m.hidden}-{row.request.cluster.name}-{row.gpus}gpu"


def read_table(path: Path | str) -> list[MeasuredSweep]:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise TableError(f"{path}: cannot read ({exc.strerror})") from None
    return read_rows(text.splitlines(), str(path))


# ------------------------------------------------------------------------------------------------ export

TABLE_LAYOUT = tuple(name for name in NAMES if name not in WORLD)
"""The layout's columns (the world is n_gpus): every dimension of the Layout."""
TABLE_COLUMNS = ("sweep", "backend", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "swiglu", "seq_len",
                 "vocab", "tied_embeddings", "norm", "gpu", "n_gpus", "gpus_per_node", *TABLE_LAYOUT, "precision",
                 "flash_attention", "state", "step_time_s", "peak_mem_gb")
MEASURED_STATES = {TrialState.OK: TrialState.OK, TrialState.STOPPED_EARLY: TrialState.OK,
                   TrialState.OOM: TrialState.OOM}
"""Ledger state -> table state: a trial stopped early kept its (partial) measurement."""


def table_row(sweep: str, model, cluster, backend: str, precision: str, flash: bool, layout, state,
              metrics: dict) -> Optional[dict]:
    """One trial as a table row (None for a trial without a measured outcome). `layout` is a dict or a Layout,
    `state` a string or a str enum."""
    layout = (layout if isinstance(layout, Layout) else Layout.from_dict(layout)).to_dict()  # older dicts: defaults
    table_state = MEASURED_STATES.get(TrialState(state))
    if table_state is None or (table_state is TrialState.OK and not metrics.get("step_time_s")):
        return None
    return {"sweep": sweep, "backend": backend, "layers": model.layers, "hidden": model.hidden, "heads": model.heads,
            "kv_heads": model.kv_heads, "ffn_hidden": model.ffn_hidden, "swiglu": model.swiglu,
            "seq_len": model.seq_len, "vocab": model.vocab, "tied_embeddings": model.tied_embeddings,
            "norm": model.norm, "gpu": cluster.name, "n_gpus": layout["gpus"],
            "gpus_per_node": cluster.gpus_per_node, **{k: layout[k] for k in TABLE_LAYOUT},
            "precision": precision, "flash_attention": flash, "state": table_state,
            "step_time_s": metrics.get("step_time_s") if table_state is TrialState.OK else None,
            "peak_mem_gb": metrics.get("peak_mem_gb") if table_state is TrialState.OK else None}


def format_table(rows: Iterable[dict], comments: Iterable[str] = ()) -> str:
    import io

    out = io.StringIO()
    for line in comments:
        out.write(f"# {line}\n")
    writer = csv.DictWriter(out, TABLE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("true" if v is True else "false" if v is False else "" if v is None else v)
                         for k, v in row.items()})
    return out.getvalue()


def export_sweep(folder: Path) -> str:
    """A sweep folder's measurements (config.yaml + ledger.sqlite) as a measured table."""
    cfg = load_saved(folder / "config.yaml")
    with Ledger(folder / "ledger.sqlite") as ledger:
        trials = ledger.trials()
    b = cfg.backend
    rows = [table_row(cfg.sweep.name, cfg.model, cfg.cluster, b.name, b.precision, b.flash_attention, t.layout, t.state,
                      t.metrics) for t in trials if not t.repeat_of]
    return format_table([r for r in rows if r], [f"SOURCE: python -m launcher.measured {folder} (sweep "
                                                 f"{cfg.sweep.name!r}, model {cfg.model.name}, "
                                                 f"cluster {cfg.cluster.name}, "
                                                 f"backend {b.name})"])


def main(argv: Optional[list[str]] = None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m launcher.measured",
                                     description="Print a sweep folder's measurements as a measured table (CSV) for "
                                                 "python -m launcher.replay.")
    parser.add_argument("folder", type=Path, help="a sweep folder made by python -m launcher, e.g. sweeps/tiny")
    args = parser.parse_args(argv)
    if not (args.folder / "config.yaml").is_file() or not (args.folder / "ledger.sqlite").is_file():
        print(f"error: {args.folder} is not a sweep folder (it needs config.yaml and ledger.sqlite)", file=sys.stderr)
        return 2
    sys.stdout.write(export_sweep(args.folder))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
