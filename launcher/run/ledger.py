"""The sweep's durable state: one sqlite file per sweep folder (sweeps/<name>/ledger.sqlite).

sqlite with WAL and synchronous=FULL: every update is one transaction, so a launcher killed at any instant
leaves either the old or the new row, never half of one. An append-only `events` table keeps the history of
every state change (what a person reads when a sweep did something surprising).
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from launcher.errors import ConfigError

STATES = ("planned", "submitted", "running", "ok", "oom", "failed", "timeout", "hang", "cancelled", "pruned")
LIVE_STATES = ("submitted", "running")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trials (
    config_hash TEXT PRIMARY KEY,
    position INTEGER NOT NULL,
    layout TEXT NOT NULL,
    predicted TEXT NOT NULL DEFAULT '{}',
    selection TEXT NOT NULL DEFAULT 'predicted',
    repeat_of TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL,
    job_id TEXT NOT NULL DEFAULT '',
    job_dir TEXT NOT NULL DEFAULT '',
    job_state TEXT NOT NULL DEFAULT '',
    exit_code INTEGER,
    job_error TEXT NOT NULL DEFAULT '',
    nodes TEXT NOT NULL DEFAULT '',
    attempts INTEGER NOT NULL DEFAULT 0,
    log_paths TEXT NOT NULL DEFAULT '[]',
    metrics TEXT NOT NULL DEFAULT '{}',
    failure_kind TEXT NOT NULL DEFAULT '',
    reason TEXT NOT NULL DEFAULT '',
    excluded_nodes TEXT NOT NULL DEFAULT '[]',
    mlflow_run_id TEXT NOT NULL DEFAULT '',
    synced INTEGER NOT NULL DEFAULT 0,
    submitted_at REAL NOT NULL DEFAULT 0,
    finished_at REAL NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    config_hash TEXT NOT NULL,
    state TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT ''
);
"""

_JSON_FIELDS = ("layout", "predicted", "log_paths", "metrics", "excluded_nodes")


@dataclass
class TrialRecord:
    config_hash: str
    position: int
    layout: dict
    predicted: dict = field(default_factory=dict)
    selection: str = "predicted"
    repeat_of: str = ""
    """For a repeated measurement: the config hash of the trial it repeats."""
    state: str = "planned"
    job_id: str = ""
    job_dir: str = ""
    """The job's folder (submitit's files and the task logs), relative to the launcher's working directory."""
    job_state: str = ""
    """How the job ended in SLURM's words (COMPLETED, FAILED, TIMEOUT, ...), kept so the log can be re-judged."""
    exit_code: Optional[int] = None
    job_error: str = ""
    nodes: str = ""
    """Where the job ran (SLURM node list)."""
    attempts: int = 0
    log_paths: list = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
    failure_kind: str = ""
    reason: str = ""
    excluded_nodes: list = field(default_factory=list)
    mlflow_run_id: str = ""
    synced: bool = False
    submitted_at: float = 0.0
    finished_at: float = 0.0
    updated_at: float = 0.0

    @property
    def is_live(self) -> bool:
        return self.state in LIVE_STATES


class _Foreign(Exception):
    """An sqlite file that holds something else than a ledger."""


def _check_foreign(db: sqlite3.Connection) -> None:
    """Tables other than the ledger's: another program's database (reading it also fails on a corrupt file)."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    other = sorted(tables - {"meta", "trials", "events", "sqlite_sequence"})
    if other:
        raise _Foreign(f"it holds the tables {', '.join(other[:5])}")


def _check_columns(db: sqlite3.Connection) -> None:
    """A `trials` table made by something else (or another version) lacks the ledger's columns."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(trials)")}
    missing = sorted(set(TrialRecord.__dataclass_fields__) - columns)
    if missing:
        raise _Foreign(f"its trials table lacks {', '.join(missing[:5])}")


def _row_to_record(row: sqlite3.Row) -> TrialRecord:
    data = dict(row)
    for name in _JSON_FIELDS:
        data[name] = json.loads(data[name])
    data["synced"] = bool(data["synced"])
    return TrialRecord(**data)


class Ledger:
    """Open (or create) the ledger of one sweep folder. `create=False` (python -m analysis): it must exist."""

    def __init__(self, path: Path, create: bool = True) -> None:
        if not create and not path.is_file():
            raise ConfigError("sweep folder", str(path.parent), f"has no ledger ({path.name}): give a folder made by "
                              "`python -m launcher`, e.g. sweeps/tiny")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(str(path), timeout=30.0, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        try:
            _check_foreign(self._db)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
            _check_columns(self._db)
        except (sqlite3.DatabaseError, _Foreign) as exc:
            self._db.close()
            raise ConfigError("sweep.name", path.parent.name, f"{path} is not a parasweep ledger ({exc}): move it "
                              "away, or start over with sweep.fresh=true (the folder is kept) or another "
                              "sweep.name") from None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- meta -------------------------------------------------------------------------------------------------
    def get_meta(self, key: str, default: Optional[str] = None) -> Optional[str]:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row["value"] if row else default

    def set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                         (key, value))

    # -- trials -----------------------------------------------------------------------------------------------
    def add_trials(self, records: Iterable[TrialRecord]) -> int:
        """Insert trials that are not in the ledger yet (existing ones keep their state). Returns how many were new."""
        now = time.time()
        new = 0
        with self._transaction():
            for r in records:
                cur = self._db.execute(
                    "INSERT OR IGNORE INTO trials(config_hash, position, layout, predicted, selection, repeat_of, "
                    "state, reason, excluded_nodes, updated_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (r.config_hash, r.position, json.dumps(r.layout), json.dumps(r.predicted), r.selection,
                     r.repeat_of, r.state, r.reason, json.dumps(r.excluded_nodes), now))
                if cur.rowcount:
                    new += 1
                    self._event(r.config_hash, r.state, "added", now)
        return new

    def get(self, config_hash: str) -> TrialRecord:
        row = self._db.execute("SELECT * FROM trials WHERE config_hash = ?", (config_hash,)).fetchone()
        if row is None:
            raise KeyError(config_hash)
        return _row_to_record(row)

    def trials(self, states: Optional[Iterable[str]] = None) -> list[TrialRecord]:
        rows = self._db.execute("SELECT * FROM trials ORDER BY position").fetchall()
        records = [_row_to_record(r) for r in rows]
        if states is not None:
            wanted = set(states)
            records = [r for r in records if r.state in wanted]
        return records

    def update(self, config_hash: str, detail: str = "", **changes: Any) -> None:
        """Change fields of one trial in one transaction, journaling a state change."""
        if not changes:
            return
        unknown = set(changes) - set(TrialRecord.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown trial fields: {sorted(unknown)}")
        if "state" in changes and changes["state"] not in STATES:
            raise ValueError(f"unknown state {changes['state']!r}; valid: {STATES}")
        now = time.time()
        values = {k: (json.dumps(v) if k in _JSON_FIELDS else int(v) if k == "synced" else v)
                  for k, v in changes.items()}
        values["updated_at"] = now
        assignments = ", ".join(f"{k} = ?" for k in values)
        with self._transaction():
            self._db.execute(f"UPDATE trials SET {assignments} WHERE config_hash = ?", (*values.values(), config_hash))
            if "state" in changes or detail:
                self._event(config_hash, changes.get("state", ""), detail, now)

    def events(self, config_hash: Optional[str] = None) -> list[dict]:
        if config_hash is None:
            rows = self._db.execute("SELECT * FROM events ORDER BY id").fetchall()
        else:
            rows = self._db.execute("SELECT * FROM events WHERE config_hash = ? ORDER BY id", (config_hash,)).fetchall()
        return [dict(r) for r in rows]

    def integrity_ok(self) -> bool:
        return self._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    # -- internals --------------------------------------------------------------------------------------------
    def _event(self, config_hash: str, state: str, detail: str, now: float) -> None:
        self._db.execute("INSERT INTO events(ts, config_hash, state, detail) VALUES(?, ?, ?, ?)",
                         (now, config_hash, state, detail))

    def _transaction(self):
        return _Transaction(self._db)


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, *_: object) -> None:
        self._db.execute("ROLLBACK" if exc_type else "COMMIT")
