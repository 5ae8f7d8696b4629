"""The sweep's durable state: one sqlite file per sweep folder (sweeps/<name>/ledger.sqlite).

sqlite with WAL and synchronous=FULL: every update is one transaction, so a launcher killed at any instant
leaves either the old or the new row, never half of one. An append-only `events` table keeps the history of
every state change (what a person reads when a sweep did something surprising).

The `trials` table's columns are derived: one per Layout dimension (tp, pp, ..., so `SELECT tp, pp, state FROM
trials` works) and one per TrialRecord field (dicts and lists as JSON). Opening a ledger adds the columns a newer
parasweep introduced (with their defaults) and converts a first-release ledger, whose layout was one JSON column.
"""

from __future__ import annotations

import functools
import json
import math
import operator
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, Optional, TypeVar

from launcher.core.errors import StorageError
from launcher.core.layout import DIMENSIONS, Layout
from launcher.core.record import TrialRecord
from launcher.core.states import TrialState

LEDGER_VERSION = "2"


class LedgerError(StorageError):
    """The ledger file is not one this parasweep can use (corrupt, another program's, or a newer version)."""


_CORRUPTION = ("malformed", "not a database", "no such column", "no such table", "database corrupt")
_KEEP_IT = "the file is left as it is: restore it from a backup, or start over with sweep.fresh=true (the old " \
           "folder is kept)"
_T = TypeVar("_T")


def _guarded(method: Callable[..., _T]) -> Callable[..., _T]:
    """A damaged ledger (a page of garbage, a dropped table) found by a read or write after opening: one LedgerError
    naming the file, not an sqlite traceback. Storage errors (full disk, read-only folder) are left to the command
    line's storage message, bugs (IntegrityError, ProgrammingError) to their traceback."""

    @functools.wraps(method)
    def guarded(self: Ledger, *args: Any, **kwargs: Any) -> _T:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            if type(exc) is not sqlite3.DatabaseError and not any(t in str(exc).lower() for t in _CORRUPTION):
                raise
            raise LedgerError(f"{self.path} is damaged ({exc}): {_KEEP_IT}") from None

    return guarded


# -- the derived table ---------------------------------------------------------------------------------------------
_RECORD_FIELDS = tuple(f for f in fields(TrialRecord) if f.name != "layout")
_JSON_TYPES = ("dict", "list")


def _type_name(annotation: object) -> str:
    """A record field's annotation as the ledger's table knows it: 'dict[str, Any]' -> 'dict'."""
    text = str(annotation)
    return text if text.startswith("Optional[") else text.split("[")[0]
_SQL_TYPES = {"int": "INTEGER", "bool": "INTEGER", "float": "REAL", "str": "TEXT", "TrialState": "TEXT",
              "Optional[int]": "INTEGER", "Layout": "TEXT", "dict": "TEXT", "list": "TEXT"}
_KEY = "config_hash"


def _column_sql(name: str, type_name: str, default: Any) -> str:
    sql = f"{name} {_SQL_TYPES[type_name]}"
    if type_name.startswith("Optional"):
        return sql
    if default is MISSING:
        return sql + " NOT NULL"
    if type_name in _JSON_TYPES:
        return sql + f" NOT NULL DEFAULT '{'{}' if type_name == 'dict' else '[]'}'"
    value = int(default) if isinstance(default, bool) else default
    return sql + f" NOT NULL DEFAULT {_literal(value)}"


def _literal(value: Any) -> str:
    return f"'{value}'" if isinstance(value, str) else repr(value)


def _columns() -> dict[str, str]:
    """column name -> its SQL definition: the record's fields, then one column per Layout dimension."""
    cols = {}
    for f in _RECORD_FIELDS:
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        cols[f.name] = _column_sql(f.name, _type_name(f.type), default)
    cols[_KEY] = f"{_KEY} TEXT PRIMARY KEY"
    cols["updated_at"] = "updated_at REAL NOT NULL"
    for d in DIMENSIONS:
        assert d.name not in cols, f"Layout.{d.name} clashes with TrialRecord.{d.name}"
        cols[d.name] = _column_sql(d.name, d.type.__name__, d.default)
    return cols


COLUMNS = _columns()
_DIMENSION_NAMES = tuple(d.name for d in DIMENSIONS)
_JSON_FIELDS = tuple(f.name for f in _RECORD_FIELDS if _type_name(f.type) in _JSON_TYPES)
_BOOL_FIELDS = tuple(f.name for f in _RECORD_FIELDS if _type_name(f.type) == "bool")
_BOOL_DIMENSIONS = tuple(d.name for d in DIMENSIONS if d.type is bool)

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trials ({", ".join(COLUMNS.values())});
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    config_hash TEXT NOT NULL,
    state TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT ''
);
"""


def _to_row(record: TrialRecord, now: float) -> dict[str, Any]:
    return dict(zip(_ROW_NAMES, _row_values(record, now)))


def _row_values(record: TrialRecord, now: float) -> tuple[Any, ...]:
    """The record's row in _ROW_NAMES order: a tuple made without a dict per row (a 50k-trial plan's insert)."""
    values = list(_RECORD_VALUES(record))
    for i in _JSON_AT:
        values[i] = _dumps(values[i])
    for i in _BOOL_AT:
        values[i] = int(values[i])
    values[_STATE_AT] = str(record.state)
    values[_UPDATED_AT] = now
    dims = list(_DIMENSION_VALUES(record.layout))
    for i in _BOOL_DIMENSIONS_AT:
        dims[i] = int(dims[i])
    return (*values, *dims)


def _as_stored(record: TrialRecord, now: float) -> TrialRecord:
    """The record as the ledger reads it back after _row_values(record, now): the text of a prune reason given as
    an enum, bools as bools, the insert time. Its JSON fields are kept as they are: equal to their JSON text read back
    when they hold JSON's own types (str keys, lists not tuples), as a plan's records do."""
    changes: dict[str, Any] = {"updated_at": now}
    for name in _TEXT_FIELDS:
        value = getattr(record, name)
        if type(value) is not str:
            changes[name] = str(value)
    for name in _BOOL_FIELDS:
        changes[name] = bool(getattr(record, name))
    values = dict(zip(_FIELD_NAMES, _FIELD_VALUES(record)))
    values.update(changes)
    return TrialRecord(**values)  # made as any record is (a copied __dict__ slows every attribute read of it)


def _store_in_place(record: TrialRecord, now: float) -> TrialRecord:
    """_as_stored without the copy: the record itself, changed to what the ledger reads back (a 50k-trial plan made
    two records per trial, issue 19)."""
    record.updated_at = now
    for name in _TEXT_FIELDS:
        value = getattr(record, name)
        if type(value) is not str:
            setattr(record, name, str(value))
    for name in _BOOL_FIELDS:
        value = getattr(record, name)
        if type(value) is not bool:
            setattr(record, name, bool(value))
    return record


def _from_row(row: tuple, parts: Optional[dict[tuple, dict]] = None) -> TrialRecord:
    """A row of `_SELECT` as a record. Read by position, and the empty JSON
    objects and lists (most of a planned trial's columns) without the JSON decoder: reading 50k rows decoded
    ~300k JSON texts (issue 19). `parts`: the shared parts of the predictions read so far (_share_parts)."""
    data = dict(zip(_RECORD_ORDER, row))
    for name in _JSON_FIELDS:
        data[name] = _loads(data[name])
    for name in _BOOL_FIELDS:
        data[name] = bool(data[name])
    for name in _REPEATED_TEXT_FIELDS:
        data[name] = sys.intern(data[name])
    if parts is not None:
        _share_parts(data["predicted"], parts)
    layout = dict(zip(_DIMENSION_NAMES, row[len(_RECORD_ORDER):]))
    for name in _BOOL_DIMENSIONS:
        layout[name] = bool(layout[name])
    for name in _TEXT_DIMENSIONS:
        layout[name] = sys.intern(layout[name])
    return TrialRecord(layout=Layout(**layout), **data)


SHARED_PARTS = ("mem_breakdown_gb",)
"""The parts of a trial's prediction that many trials hold alike: the memory terms of one batch class (layouts apart
only in gbs) are the same. A read keeps one dict per distinct content and gives it to every record that holds it
(a resumed 50k-trial sweep decoded 47,744 of them, 3,061 distinct: ~25 MB). A shared dict is read-only, as the
records a read gives are (launcher.run.view): nothing changes a prediction in place; a new one is written through
Ledger.update and read back as a new record."""


def _share_parts(predicted: dict[str, Any], parts: dict[tuple, dict]) -> None:
    """Replace predicted's SHARED_PARTS by the dicts of the same content read before (`parts`: content -> dict).
    The content is exact: key names in order and each value's float bits (float.hex: 1 and 1.0 and True never
    merge, nor 0.0 and -0.0), so the shared dict writes back as the same JSON text; a part with a value that is
    not a float is left unshared. The time breakdown's zero terms become one float object (_ZERO_TERMS)."""
    for name in SHARED_PARTS:
        part = predicted.get(name)
        if type(part) is not dict:
            continue
        try:
            key = (tuple(part), " ".join(map(float.hex, part.values())))
        except TypeError:   # an int, a bool, a string, a nested object: not what the estimator writes
            continue
        predicted[name] = parts.setdefault(key, part)
    part = predicted.get(_ZERO_TERMS)
    if type(part) is dict:
        for name, value in part.items():
            if value == 0.0 and type(value) is float and math.copysign(1.0, value) == 1.0:
                part[name] = _ZERO   # the record's own dict (not shared); the same value, one object


_ZERO_TERMS = "time_breakdown_s"
"""The part of a prediction whose terms are often exactly 0.0 (no pipeline bubble, no context-parallel traffic):
each such term is one float object, not one per trial (~250k of 47,744 trials' 570k terms: ~6 MB)."""
_ZERO = 0.0


def _dumps(value: Any) -> str:
    """json.dumps, with an empty dict or list written without the encoder (most fields of a planned trial)."""
    if not value and isinstance(value, (dict, list)):
        return "{}" if isinstance(value, dict) else "[]"
    return json.dumps(value)


def _loads(text: str) -> Any:
    """json.loads, with '{}' and '[]' answered without the decoder (each new: records are not shared), and the
    objects' keys shared between records (_DECODER)."""
    if text == "{}":
        return {}
    if text == "[]":
        return []
    return _DECODER.decode(text)


def _interned(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return {sys.intern(key): value for key, value in pairs}


_DECODER = json.JSONDecoder(object_pairs_hook=_interned)
"""json.loads with each object's keys interned: the decoder makes new key strings for every text it reads, and a
resumed 50k-trial sweep's predictions and calibrations (~40 keys each) held ~90 MB of copies of the same few dozen
names (issue 19). The same dicts as json.loads gives (a repeated key keeps its first place and its last value)."""


_RECORD_NAMES = frozenset(f.name for f in _RECORD_FIELDS)
_RECORD_ORDER = tuple(f.name for f in _RECORD_FIELDS)
_SELECTED = _RECORD_ORDER + _DIMENSION_NAMES
"""The columns a record is read from, in the order _from_row takes them."""
_ROW_NAMES = tuple(dict.fromkeys((*_RECORD_ORDER, "updated_at", *_DIMENSION_NAMES)))
"""The columns _to_row gives, in its order."""
assert _ROW_NAMES == _RECORD_ORDER + _DIMENSION_NAMES, "_row_values gives the record's fields, then the layout's"
_RECORD_VALUES = operator.attrgetter(*_RECORD_ORDER)
_DIMENSION_VALUES = operator.attrgetter(*_DIMENSION_NAMES)
_JSON_AT = tuple(_RECORD_ORDER.index(name) for name in _JSON_FIELDS)
_BOOL_AT = tuple(_RECORD_ORDER.index(name) for name in _BOOL_FIELDS)
_BOOL_DIMENSIONS_AT = tuple(_DIMENSION_NAMES.index(name) for name in _BOOL_DIMENSIONS)
_STATE_AT, _UPDATED_AT = _RECORD_ORDER.index("state"), _RECORD_ORDER.index("updated_at")
_FIELD_NAMES = tuple(f.name for f in fields(TrialRecord))
_FIELD_VALUES = operator.attrgetter(*_FIELD_NAMES)
_TEXT_FIELDS = tuple(f.name for f in _RECORD_FIELDS if _type_name(f.type) == "str")
_REPEATED_TEXT_FIELDS = ("selection", "pruned_by", "failure_kind", "job_state", "reason")
"""Text columns with a few distinct values over many trials: one string object each (sys.intern), not one per row
(~2.7 MB a column at 50k trials)."""
_TEXT_DIMENSIONS = tuple(d.name for d in DIMENSIONS if d.type is str)
PLAN_KEY, PLAN_TRIALS = "plan_key", "plan_trials"
"""meta keys of the stored plan (Ledger.add_trials' `plan`)."""
_SELECT = f"SELECT {', '.join(_SELECTED)} FROM trials"
_IN_CHUNK = 500
"""Config hashes per `IN (...)` query (sqlite allows 999 parameters in older builds)."""


class Ledger:
    """Open (or create) the ledger of one sweep folder. `create=False` (python -m analysis): it must exist."""

    def __init__(self, path: Path, *, create: bool = True) -> None:
        if not create and not path.is_file():
            raise LedgerError(f"{path} does not exist: give a sweep folder made by `python -m launcher` "
                              "(it holds ledger.sqlite)")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._written: list[str] = []
        """Config hashes of the rows this connection wrote, in order (launcher.run.view reads only those again)."""
        self._parts: dict[tuple, dict] = {}
        """The predictions' shared parts this connection has read (_share_parts): the records it reads share them."""
        try:
            self._db = sqlite3.connect(str(path), timeout=30.0, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._open_schema()
        except sqlite3.DatabaseError as exc:
            if type(exc) is not sqlite3.DatabaseError and not any(t in str(exc).lower() for t in _CORRUPTION):
                raise  # a full disk or a read-only folder: the command line's storage message
            raise LedgerError(f"{path} is not a usable parasweep ledger ({exc}): move it away, or start over "
                              "with sweep.fresh=true (the old folder is kept)") from None

    def _open_schema(self) -> None:
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        other = sorted(tables - {"meta", "trials", "events", "sqlite_sequence"})
        if other or (tables and "trials" not in tables):
            raise LedgerError(f"{self.path} is another program's sqlite file (tables: {', '.join(sorted(tables))}): "
                              "move it away, or pick another sweep.name")
        if tables:  # a page of garbage is not always an error when read: sqlite's own check finds it
            problem = self._db.execute("PRAGMA quick_check(1)").fetchone()[0]
            if problem != "ok":
                where = " ".join(line for line in problem.splitlines() if not line.startswith("***"))
                raise LedgerError(f"{self.path} is damaged (sqlite's quick_check: {where}): {_KEEP_IT}")
        if "meta" in tables:  # checked before anything is written: a newer ledger is left exactly as it is
            self._check_version(self.get_meta("ledger_version"))
        existing = [r["name"] for r in self._db.execute("PRAGMA table_info(trials)")]
        if "layout" in existing:
            _migrate_v1(self._db)
            existing = [r["name"] for r in self._db.execute("PRAGMA table_info(trials)")]
        self._check_rows(existing)
        self._db.executescript(_SCHEMA)
        for name, sql in COLUMNS.items():
            if existing and name not in existing:  # a dimension or field added by a newer parasweep
                self._db.execute(f"ALTER TABLE trials ADD COLUMN {sql}")
        if self.get_meta("ledger_version") != LEDGER_VERSION:
            self.set_meta("ledger_version", LEDGER_VERSION)

    def _check_rows(self, columns: list[str]) -> None:
        """One query for a value no parasweep writes (a hand-edited ledger: state='paused', tp=0), found at open
        instead of as a crash (a ZeroDivisionError in the estimator) deep in a later phase."""
        checks = [(name, sql) for name, sql in _ROW_CHECKS if name in columns]
        if not checks:
            return
        where = " OR ".join(f"({sql})" for _, sql in checks)
        names = ", ".join(name for name, _ in checks)
        row = self._db.execute(f"SELECT config_hash, {names} FROM trials WHERE {where} LIMIT 1").fetchone()
        if row is None:
            return
        for name, sql in checks:
            if self._db.execute(f"SELECT 1 FROM trials WHERE config_hash = ? AND ({sql})",
                                (row["config_hash"],)).fetchone():
                raise LedgerError(f"{self.path}: trial {row['config_hash']}: {name}={row[name]!r} is not a value "
                                  f"parasweep writes ({_VALID[name]}): set it back with sqlite3 or restore the file "
                                  "from a backup (nothing was changed)")

    def _check_version(self, version: Optional[str]) -> None:
        """The meta table's ledger_version: a whole number, not newer than this parasweep's (compared as numbers:
        '10' is newer than '2')."""
        if version is None:
            return
        if not version.strip().isdigit():
            raise LedgerError(f"{self.path}: meta ledger_version={version!r} is not a version number: {_KEEP_IT}")
        if int(version) > int(LEDGER_VERSION):
            raise LedgerError(f"{self.path} was written by a newer parasweep (ledger version {version}, this one "
                              f"reads up to {LEDGER_VERSION}): upgrade parasweep to use it (the file is left as it is)")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- meta -------------------------------------------------------------------------------------------------
    @_guarded
    def get_meta(self, key: str, default: Optional[str] = None) -> Optional[str]:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row["value"] if row else default

    @_guarded
    def set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT INTO meta(key, value) VALUES(?, ?) "
                         "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                         (key, value))

    # -- trials -----------------------------------------------------------------------------------------------
    @_guarded
    def add_trials(self, records: Iterable[TrialRecord], plan: Optional[tuple[str, Sequence[str]]] = None,
                   inserted: Optional[list[TrialRecord]] = None, adopt: bool = False) -> int:
        """Insert trials that are not in the ledger yet (existing ones keep their state). Returns how many were new.
        `plan`: (its key, the kept trials' config hashes in plan order), kept in the same transaction as the trials
        (launcher.run.plan_store): a resume that finds it reads it back instead of planning again. `inserted`: a list
        that gets the new trials as the ledger now holds them (_as_stored: what `trials()` would read back for
        records whose JSON fields hold JSON's own types, as a plan's do), in the order given, once they are
        committed: a caller that needs them need not read and decode them again (50k rows: seconds and ~100 MB of
        decoded keys, issue 19). `adopt`: the records are the caller's to give away (a generator's, as the loop's):
        `inserted` gets them themselves, changed in place to their stored form, instead of copies."""
        now = time.time()
        keep = _store_in_place if adopt else _as_stored
        stored: list[TrialRecord] = []
        with self._transaction():
            known = self.config_hashes()  # in the transaction: what INSERT OR IGNORE would ignore, row by row
            fresh: list[tuple[str, str]] = []

            def rows() -> Iterator[tuple[Any, ...]]:
                # converted as sqlite takes them, and the records too when `records` is a generator (50k records
                # with their predictions, or rows of JSON, held at once cost ~100 MB each)
                for r in records:
                    if r.config_hash not in known:
                        known.add(r.config_hash)
                        fresh.append((r.config_hash, str(r.state)))
                        if inserted is not None:
                            stored.append(keep(r, now))
                        yield _row_values(r, now)

            # one statement for the whole plan (a 50k-trial plan row by row took seconds), the journal likewise
            self._db.executemany(f"INSERT INTO trials({', '.join(_ROW_NAMES)}) "
                                 f"VALUES({', '.join('?' for _ in _ROW_NAMES)})", rows())
            self._db.executemany("INSERT INTO events(ts, config_hash, state, detail) VALUES(?, ?, ?, ?)",
                                 ((now, key, state, "added") for key, state in fresh))
            if plan is not None:
                self.set_meta(PLAN_KEY, plan[0])
                self.set_meta(PLAN_TRIALS, "\n".join(plan[1]))
        self._written.extend(key for key, _ in fresh)
        if inserted is not None:
            inserted.extend(stored)
        return len(fresh)

    @_guarded
    def stored_plan(self) -> Optional[tuple[str, list[str]]]:
        """(key, kept trials' config hashes in plan order) of the plan add_trials was last given; None when it was
        given none (a folder of an earlier release)."""
        key, text = self.get_meta(PLAN_KEY), self.get_meta(PLAN_TRIALS)
        if not key or text is None:
            return None
        return key, text.split("\n") if text else []

    @_guarded
    def layouts(self) -> dict[str, Layout]:
        """Every trial's layout by config hash (the layout columns alone: no record decoded)."""
        cursor = self._db.cursor()
        cursor.row_factory = None
        out = {}
        for row in cursor.execute(f"SELECT config_hash, {', '.join(_DIMENSION_NAMES)} FROM trials"):
            layout = dict(zip(_DIMENSION_NAMES, row[1:]))
            for name in _BOOL_DIMENSIONS:
                layout[name] = bool(layout[name])
            out[row[0]] = Layout(**layout)
        return out

    @_guarded
    def config_hashes(self) -> set[str]:
        """Every trial's config hash (one column read: what a resumed plan need not convert again)."""
        return {row[0] for row in self._db.execute("SELECT config_hash FROM trials")}

    @_guarded
    def get(self, config_hash: str) -> TrialRecord:
        records = self._records(f"{_SELECT} WHERE config_hash = ?", (config_hash,))
        if not records:
            raise KeyError(config_hash)
        return records[0]

    @_guarded
    def get_many(self, config_hashes: Iterable[str]) -> list[TrialRecord]:
        """The trials of these config hashes that the ledger holds (in no particular order)."""
        keys = list(config_hashes)
        out = []
        for i in range(0, len(keys), _IN_CHUNK):
            chunk = keys[i:i + _IN_CHUNK]
            marks = ", ".join("?" for _ in chunk)
            out += self._records(f"{_SELECT} WHERE config_hash IN ({marks})", chunk)
        return out

    def written_since(self, mark: int) -> tuple[int, set[str]]:
        """(a new mark, the config hashes this connection wrote since `mark`): what an in-memory copy of the trials
        must read again (0: everything this connection ever wrote)."""
        return len(self._written), set(self._written[mark:])

    def data_version(self) -> int:
        """sqlite's data_version: it changes when another connection commits (this one's own writes leave it)."""
        return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    @_guarded
    def trials(self, states: Optional[Iterable[str]] = None) -> list[TrialRecord]:
        """Every trial in position order, or those in `states` (chosen by sqlite: the others are not decoded)."""
        if states is None:
            return self._records(f"{_SELECT} ORDER BY position")
        wanted = sorted({str(TrialState(s)) for s in states})
        return self._records(f"{_SELECT} WHERE state IN ({', '.join('?' for _ in wanted)}) ORDER BY position",
                             wanted)

    @_guarded
    def update(self, config_hash: str, detail: str = "", **changes: Any) -> None:
        """Change fields of one trial in one transaction, journaling a state change."""
        self.update_each([(config_hash, detail, changes)])

    @_guarded
    def update_each(self, updates: Sequence[tuple[str, str, dict[str, Any]]]) -> None:
        """(config hash, detail, changes) of several trials, as `update` does each, in one transaction (one
        sync to disk: the loop marks a poll's submissions and prunes together; all or none survive a kill)."""
        updates = [u for u in updates if u[2]]
        if not updates:
            return
        now = time.time()
        statements = [self._update_statement(config_hash, changes, now) for config_hash, _, changes in updates]
        with self._transaction():
            for (config_hash, detail, changes), (sql, values) in zip(updates, statements):
                self._db.execute(sql, values)
                if "state" in changes or detail:
                    self._event(config_hash, str(changes.get("state", "")), detail, now)
        self._written.extend(u[0] for u in updates)

    def _update_statement(self, config_hash: str, changes: dict[str, Any], now: float) -> tuple[str, tuple]:
        """The UPDATE of one trial's `changes` (checked: known fields, a known state; the state normalised in
        `changes` for the journal)."""
        unknown = set(changes) - _RECORD_NAMES
        if unknown:
            raise ValueError(f"unknown trial fields: {sorted(unknown)}")
        if "state" in changes:
            try:
                changes["state"] = TrialState(changes["state"])
            except ValueError:
                raise ValueError(f"unknown state {changes['state']!r}; valid: "
                                 f"{', '.join(s.value for s in TrialState)}") from None
        values = {k: (json.dumps(v) if k in _JSON_FIELDS else int(v) if k in _BOOL_FIELDS
                      else str(v) if k == "state" else v) for k, v in changes.items()}
        values["updated_at"] = now
        assignments = ", ".join(f"{k} = ?" for k in values)
        return f"UPDATE trials SET {assignments} WHERE config_hash = ?", (*values.values(), config_hash)

    @_guarded
    def update_many(self, changes: dict[str, dict[str, Any]], detail: str = "") -> None:
        """Change fields of many trials in one transaction (a re-prediction of every planned trial); no state
        changes here (those go through update, one journaled event each)."""
        if not changes:
            return
        now = time.time()
        with self._transaction():
            for config_hash, fields_ in changes.items():
                unknown = set(fields_) - _RECORD_NAMES
                if unknown or "state" in fields_:
                    raise ValueError(f"update_many changes no state and only known fields: {sorted(fields_)}")
                values = {k: (json.dumps(v) if k in _JSON_FIELDS else int(v) if k in _BOOL_FIELDS else v)
                          for k, v in fields_.items()}
                values["updated_at"] = now
                assignments = ", ".join(f"{k} = ?" for k in values)
                self._db.execute(f"UPDATE trials SET {assignments} WHERE config_hash = ?",
                                 (*values.values(), config_hash))
                if detail:
                    self._event(config_hash, "", detail, now)
        self._written.extend(changes)

    @_guarded
    def events(self, config_hash: Optional[str] = None) -> list[dict]:
        if config_hash is None:
            rows = self._db.execute("SELECT * FROM events ORDER BY id").fetchall()
        else:
            rows = self._db.execute("SELECT * FROM events WHERE config_hash = ? ORDER BY id", (config_hash,)).fetchall()
        return [dict(r) for r in rows]

    @_guarded
    def integrity_ok(self) -> bool:
        return self._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    # -- internals --------------------------------------------------------------------------------------------
    def _records(self, query: str, params: Sequence[Any] = ()) -> list[TrialRecord]:
        """The rows of a `_SELECT` query as records, read as plain tuples (sqlite3.Row costs a dict per row), one at a
        time (fetchall held every row's JSON text with the records made of them: ~70 MB at 50k trials)."""
        cursor = self._db.cursor()
        cursor.row_factory = None
        return [self._record(row) for row in cursor.execute(query, params)]

    def _record(self, row: tuple) -> TrialRecord:
        """A row as a TrialRecord; a value no parasweep writes (an edited ledger) is a LedgerError naming it."""
        try:
            return _from_row(row, self._parts)
        except (ValueError, TypeError, KeyError) as exc:
            named = dict(zip(_SELECTED, row))
            raise LedgerError(f"{self.path}: trial {named['config_hash']}: {_row_problem(named, exc)}: set it back "
                              f"with sqlite3 or restore the file from a backup (nothing was changed)") from None

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


def _row_checks() -> tuple[list[tuple[str, str]], dict[str, str]]:
    """(column, SQL condition of a bad value) per state and Layout dimension, and what each may hold."""
    states = tuple(s.value for s in TrialState)
    checks = [("state", f"state NOT IN ({', '.join(map(_literal, states))})")]
    valid = {"state": f"valid: {', '.join(states)}"}
    for d in DIMENSIONS:
        allowed = d.dim.choices or ((False, True) if d.type is bool else None)
        if allowed is not None:
            values = [_literal(int(v) if isinstance(v, bool) else v) for v in allowed]
            checks.append((d.name, f"{d.name} NOT IN ({', '.join(values)})"))
            valid[d.name] = f"valid: {', '.join(map(str, allowed))}"
        elif d.type is int:
            checks.append((d.name, f"typeof({d.name}) != 'integer' OR {d.name} < 1"))
            valid[d.name] = "valid: a positive integer"
    return checks, valid


_ROW_CHECKS, _VALID = _row_checks()


def _row_problem(row: dict[str, Any], exc: Exception) -> str:
    """Which value of a row cannot be read, and what it may be."""
    state = row["state"]
    if state not in {s.value for s in TrialState}:
        return f"state={state!r} is not a trial state (valid: {', '.join(s.value for s in TrialState)})"
    for name in _JSON_FIELDS:
        try:
            json.loads(row[name])
        except (TypeError, ValueError):
            return f"{name}={str(row[name])[:60]!r} is not the JSON list/object parasweep writes"
    return f"a value cannot be read ({type(exc).__name__}: {str(exc)[:120]})"


def _migrate_v1(db: sqlite3.Connection) -> None:
    """A first-release ledger kept the layout as one JSON column and no pruning code: rebuild the table with the
    derived columns, in one transaction (a launcher killed here leaves the old table)."""
    rows = [dict(r) for r in db.execute("SELECT * FROM trials ORDER BY position")]
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("ALTER TABLE trials RENAME TO trials_v1")
        db.execute(f"CREATE TABLE trials ({', '.join(COLUMNS.values())})")
        for row in rows:
            layout = Layout.from_dict(json.loads(row.pop("layout")))
            reason = row.get("reason", "")
            pruned_by = ("predicted_oom" if reason.startswith("predicted_oom")
                         else "oom_dominated" if reason.startswith("needs more memory") else "")
            row["node_list"] = row.pop("nodes", "")
            data = {k: v for k, v in row.items() if k in _RECORD_NAMES}
            for name in _JSON_FIELDS:
                data[name] = json.loads(data.get(name) or ("{}" if name in ("predicted", "metrics") else "[]"))
            record = TrialRecord(layout=layout, pruned_by=pruned_by, **data)
            new = _to_row(record, row.get("updated_at") or time.time())
            db.execute(f"INSERT INTO trials({', '.join(new)}) VALUES({', '.join('?' for _ in new)})",
                       tuple(new.values()))
        db.execute("DROP TABLE trials_v1")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
