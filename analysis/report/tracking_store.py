"""The MLflow sqlite store: created once, under a file lock, and never half-made.

MLflow creates a sqlite store in place on its first use (create the tables, then run about sixty alembic
migrations) and does not guard that against a second process: three launchers started at once in a fresh folder
race each other through the migrations ("duplicate column name", alembic's CommandError), and a launcher killed
during them leaves a store that no later MLflow opens ("table _alembic_tmp_tags already exists") and that
`mlflow db upgrade` cannot repair either.

Here a store is made ready before any MLflow client touches it, holding an flock on `<store>.lock` beside it:
- no store yet: it is created and migrated under a temporary name in the same folder, then renamed into place,
  so that a kill at any instant leaves either no store or a whole one (a temporary file left by a kill is
  removed by the next creator);
- a store at MLflow's current schema: used as it is;
- a store at another schema (an older MLflow's, or one left half-made by a kill of an earlier parasweep): a copy
  is migrated and renamed into place; if that copy cannot be migrated the store is moved aside as
  `<store>.broken-<stamp>` (with its journal) and a new one is created, and the caller says so in one message.
Every process takes the lock for this check only, so any number of launchers and `python -m analysis` share one
store; the experiment is looked up or created under the same lock (two sweeps naming one experiment).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

LOCK_WAIT_S = 600.0
"""How long a process waits for another one to finish creating or migrating the store."""
COPY_BUSY_WAIT_S = 30.0
"""How long the copy of a store to migrate waits for a writer of it."""
CREATING = ".creating-"
BROKEN = ".broken-"
NOT_THE_SCHEMA = ("locked", "disk is full", "readonly", "unable to open")
"""Failures that say nothing about the store's schema: the store is left where it is."""
SQLITE_BUSY_CODES = (5, 6)
"""SQLITE_BUSY and SQLITE_LOCKED, as sqlite3's backup progress callback reports them (typeshed lacks the names)."""


class StoreLockTimeout(OSError):
    """Another process held the store's creation lock for LOCK_WAIT_S."""


def sqlite_file(uri: str) -> Optional[Path]:
    """The absolute path of a `sqlite:///` store, None for any other URI (a tracking server, in-memory sqlite)."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///"):].split("?", 1)[0]
    if not path or path == ":memory:":
        return None
    return Path(os.path.abspath(path))


def absolute_uri(uri: str) -> str:
    """A relative `sqlite:///mlflow.db` made absolute against the working directory (other URIs as they are)."""
    path = sqlite_file(uri)
    if path is None:
        return uri
    query = uri.partition("?")[2]
    return f"sqlite:///{path}" + (f"?{query}" if query else "")


@contextlib.contextmanager
def store_lock(db: Path, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold an exclusive flock on `<db>.lock` (released when this process ends, however it ends)."""
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.with_name(db.name + ".lock"), "a+") as handle:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StoreLockTimeout(f"another process has been creating the MLflow store {db} for "
                                           f"{wait_s:.0f} s (lock {handle.name})") from None
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ready_store(db: Path) -> str:
    """Make the sqlite store at `db` usable by this MLflow (call it holding store_lock). Returns '' or the one
    message to show when a store that could not be used was moved aside."""
    _remove_leftovers(db)
    if not db.exists() or db.stat().st_size == 0:
        db.unlink(missing_ok=True)
        _create(db)
        return ""
    head = _head_revision()
    found = _revision(db)
    if head is None or found == head:
        return ""
    try:  # another schema: migrate a copy, so that a kill now leaves the store as it was
        _create(db, copy_of=db)
        return ""
    except _schema_errors() as exc:
        if any(text in str(exc) for text in NOT_THE_SCHEMA):
            raise
        kept = _move_aside(db)
        _create(db)
        runs = _count_runs(kept)
        lost = (f"; its {runs} runs stay there, and `python -m analysis SWEEP_FOLDER --resync-all` fills the new "
                "store again from a sweep's ledger" if runs else "")
        return (f"the MLflow store {db} could not be opened (schema {found or 'unknown'}, "
                f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}): it was probably left "
                f"half-made by a process killed while creating it. Moved aside to {kept.name}{lost}; a new store was "
                "created")


def _create(db: Path, copy_of: Optional[Path] = None) -> None:
    """A store at MLflow's current schema at `db`, made under a temporary name and renamed into place."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    fd, tmp_name = tempfile.mkstemp(prefix=db.name + CREATING, dir=db.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        if copy_of is not None:
            _copy_db(copy_of, tmp)
        else:
            tmp.unlink()  # sqlite creates it
        uri = f"sqlite:///{tmp}"
        store = SqlAlchemyStore(uri, (db.parent / "mlartifacts").as_uri())  # creates and migrates the tables
        store.engine.dispose()  # every connection closed: the file is complete and no one writes it any more
        engines = getattr(SqlAlchemyStore, "_engine_map", None)
        if isinstance(engines, dict):
            engines.pop(uri, None)
        os.replace(tmp, db)
        _drop_connections_to(db, engines)
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + "-journal")):
            leftover.unlink(missing_ok=True)


def _drop_connections_to(db: Path, engines: object) -> None:
    """This process's pooled connections to the file that was at `db` (a store moved aside or replaced): sqlite
    refuses writes through them ("attempt to write a readonly database"); disposed, the engine reopens the path."""
    if not isinstance(engines, dict):
        return
    for uri, engine in list(engines.items()):
        if isinstance(uri, str) and sqlite_file(uri) == db:
            engine.dispose()


def _copy_db(source: Path, dest: Path) -> None:
    """A consistent copy through sqlite's backup API (a hot journal beside the source is rolled back first).
    sqlite3's backup() retries a busy source forever: the progress callback gives up after COPY_BUSY_WAIT_S."""
    deadline = time.monotonic() + COPY_BUSY_WAIT_S

    def give_up_when_busy_too_long(status: int, remaining: int, total: int) -> None:
        if status in SQLITE_BUSY_CODES and time.monotonic() > deadline:
            raise sqlite3.OperationalError(f"database is locked (busy for {COPY_BUSY_WAIT_S:.0f} s)")

    try:
        with contextlib.closing(sqlite3.connect(str(source), timeout=COPY_BUSY_WAIT_S)) as src, \
                contextlib.closing(sqlite3.connect(str(dest))) as out:
            src.backup(out, progress=give_up_when_busy_too_long, sleep=0.05)
    except sqlite3.Error as exc:  # says nothing about the schema: the store stays where it is
        raise OSError(f"cannot copy the MLflow store {source} to migrate it: {exc}") from exc


def _remove_leftovers(db: Path) -> None:
    """Temporary stores of creators that were killed (only the lock holder creates: none is in use now)."""
    for path in db.parent.glob(db.name + CREATING + "*"):
        with contextlib.suppress(OSError):
            path.unlink()


def _move_aside(db: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    kept = db.with_name(f"{db.name}{BROKEN}{stamp}")
    n = 1
    while kept.exists():
        n += 1
        kept = db.with_name(f"{db.name}{BROKEN}{stamp}.{n}")
    journal = db.with_name(db.name + "-journal")
    os.replace(db, kept)
    if journal.exists():  # a hot journal belongs to its database: it must follow it
        os.replace(journal, kept.with_name(kept.name + "-journal"))
    return kept


def _revision(db: Path) -> str:
    """The alembic revision recorded in the store ('' when there is none)."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
        try:
            row = con.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.Error:
            return ""
    return str(row[0]) if row else ""


def _count_runs(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
        try:
            return int(con.execute("SELECT count(*) FROM runs").fetchone()[0])
        except sqlite3.Error:
            return 0


def _head_revision() -> Optional[str]:
    """The schema revision this MLflow writes (None if this MLflow does not say: the store is then left to it)."""
    try:
        from mlflow.store.db.utils import _get_latest_schema_revision

        return str(_get_latest_schema_revision())
    except (ImportError, AttributeError):
        return None


def _schema_errors() -> tuple[type[BaseException], ...]:
    """What a store that cannot be migrated raises: alembic's and SQLAlchemy's errors, MLflow's (out-of-date
    schema), sqlite's."""
    errors: list[type[BaseException]] = [sqlite3.DatabaseError]
    for module, name in (("alembic.util.exc", "CommandError"), ("sqlalchemy.exc", "SQLAlchemyError"),
                         ("mlflow.exceptions", "MlflowException")):
        with contextlib.suppress(ImportError, AttributeError):
            errors.append(getattr(__import__(module, fromlist=[name]), name))
    return tuple(errors)
