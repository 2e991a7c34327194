"""The embedded backend: one SQLite file, the default for local runs and the MiniCluster.

WAL journal mode lets readers go on while one process writes; the busy timeout makes a
writer wait for another process's transaction instead of failing. Within a process one
connection is shared by all threads behind a lock (SQLite serializes writers anyway).
Writes start with ``BEGIN IMMEDIATE`` so a transaction takes the write lock up front and
never has to upgrade a read lock, which is where SQLite would fail without waiting.

An open SQLite connection goes on writing to a file that was deleted or replaced (the
inode lives while it is open), which would lose every later record without an error. Each
operation therefore checks first that the path still names the file it opened.

The file stays bounded, not only its rows: a new file is made with incremental auto-vacuum,
so the pages of jobs removed by ``expire_jobs`` go back to the file system at once, and the
write-ahead log is cut back to ``WAL_SIZE_LIMIT`` after each checkpoint. A file made before
(auto-vacuum off) reuses its free pages; ``reclaim_space(full=True)`` (``flink-agents log
prune``) rewrites it once, with auto-vacuum on from then on.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from flink_agents.runtime.action_log._base import (
    ActionIdentity,
    ActionLog,
    ActionRecord,
    DurableCall,
    EncodedCall,
    EncodedRecord,
    InterruptedAction,
    JobMarker,
    JobSummary,
    PickleSerializer,
    Serializer,
    Spent,
    decode_call,
    decode_record,
    interrupted_actions,
    job_summaries,
)

BUSY_TIMEOUT_MS = 30_000
WAL_SIZE_LIMIT = 64 * 1024 * 1024
"""Bytes the write-ahead log file is cut back to after a checkpoint (SQLite keeps it at its
largest size otherwise)."""

_ID = "job, run_key, run_sequence, step, action"
_WHERE_ID = "job = ? AND run_key = ? AND run_sequence = ? AND step = ? AND action = ?"

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        f"""CREATE TABLE action_log_records (
            job TEXT NOT NULL, run_key TEXT NOT NULL, run_sequence INTEGER NOT NULL,
            step INTEGER NOT NULL, action TEXT NOT NULL,
            epoch INTEGER NOT NULL, payload BLOB NOT NULL,
            PRIMARY KEY ({_ID}))""",
        "CREATE INDEX action_log_records_epoch ON action_log_records (job, epoch)",
        f"""CREATE TABLE action_log_calls (
            job TEXT NOT NULL, run_key TEXT NOT NULL, run_sequence INTEGER NOT NULL,
            step INTEGER NOT NULL, action TEXT NOT NULL, call_index INTEGER NOT NULL,
            function TEXT NOT NULL, args_digest TEXT NOT NULL,
            epoch INTEGER NOT NULL, payload BLOB NOT NULL,
            PRIMARY KEY ({_ID}, call_index))""",
        "CREATE INDEX action_log_calls_epoch ON action_log_calls (job, epoch)",
    ),
    (  # 2: job markers (2026-11-28), for expire_jobs; older versions ignore the table
        """CREATE TABLE action_log_jobs (
            job TEXT NOT NULL PRIMARY KEY, generated INTEGER NOT NULL,
            retention_ms INTEGER NOT NULL, seen_ms INTEGER NOT NULL)""",
    ),
    (  # 3: budgets' spend per window and shared rate limits' pace (2026-11-29), for add_spend
        # and pace; older versions ignore them
        """CREATE TABLE action_log_spend (
            scope TEXT NOT NULL, window_start INTEGER NOT NULL, tokens INTEGER NOT NULL,
            cost REAL NOT NULL, calls INTEGER NOT NULL, PRIMARY KEY (scope, window_start))""",
        """CREATE TABLE action_log_pace (
            scope TEXT NOT NULL PRIMARY KEY, next_ms REAL NOT NULL)""",
    ),
)
"""Schema migrations in order: ``setup`` applies those after the stored version. Append only."""


# Budgets' spend (``add_spend``), served by the primary key (scope, window_start).
_ADD_SPEND = (
    "INSERT INTO action_log_spend (scope, window_start, tokens, cost, calls)"
    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (scope, window_start) DO UPDATE SET"
    " tokens = action_log_spend.tokens + excluded.tokens,"
    " cost = action_log_spend.cost + excluded.cost,"
    " calls = action_log_spend.calls + excluded.calls"
    " RETURNING tokens, cost, calls"
)
_PACE = (
    "INSERT INTO action_log_pace (scope, next_ms) VALUES (?, ?)"
    " ON CONFLICT (scope) DO UPDATE SET"
    " next_ms = MAX(action_log_pace.next_ms, ?) + ? RETURNING next_ms"
)
_DROP_SPEND = "DELETE FROM action_log_spend WHERE scope = ? AND window_start < ?"
_SPEND = "SELECT tokens, cost, calls FROM action_log_spend WHERE scope = ? AND window_start = ?"


_EVERY_JOB = """SELECT job FROM action_log_records UNION SELECT job FROM action_log_calls"""

# Served by the primary keys' indexes, which start with (job, run_key, run_sequence).
_RUN_INDEX = """SELECT run_key, MAX(run_sequence) FROM (
    SELECT run_key, MAX(run_sequence) AS run_sequence FROM action_log_records
    WHERE job = ? GROUP BY run_key
    UNION ALL
    SELECT run_key, MAX(run_sequence) FROM action_log_calls WHERE job = ? GROUP BY run_key
) GROUP BY run_key"""


# Job markers (``expire_jobs``).
_MARKER_COLUMNS = "generated, retention_ms, seen_ms"
_MARKER = f"SELECT {_MARKER_COLUMNS} FROM action_log_jobs"
_MARK_JOB = (
    f"INSERT INTO action_log_jobs (job, {_MARKER_COLUMNS}) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (job) DO UPDATE SET generated = excluded.generated,"
    " retention_ms = excluded.retention_ms, seen_ms = MAX(seen_ms, excluded.seen_ms)"
)
_UNSEEN_JOBS = "SELECT job FROM action_log_jobs WHERE seen_ms < ? - retention_ms"
# Served by the (job, epoch) indexes.
_HOLDS_SINCE = (
    "SELECT EXISTS (SELECT 1 FROM action_log_records WHERE job = ? AND epoch >= ?)"
    " OR EXISTS (SELECT 1 FROM action_log_calls WHERE job = ? AND epoch >= ?)"
)
_NEVER = -(2**63)
"""An epoch below every other: ``_HOLDS_SINCE`` with it asks whether a job holds any row."""
_RECORDS_PER_JOB = (
    "SELECT job, COUNT(*), SUM(LENGTH(payload)), MAX(epoch) FROM action_log_records GROUP BY job"
)
_INTERRUPTED_PER_JOB = (
    "SELECT job, COUNT(*), SUM(size), MAX(epoch) FROM (SELECT job, SUM(LENGTH(payload)) AS size,"
    f" MAX(epoch) AS epoch FROM action_log_calls GROUP BY {_ID}) GROUP BY job"
)


def _marker_row(marker: JobMarker) -> tuple[str, int, int, int]:
    return (marker.job, int(marker.generated), marker.retention_ms, marker.seen_ms)


# Batches are written with multi-row statements: the sqlite3 module releases the GIL around
# every step, and each time the writer thread wants it back it may wait for the operator
# thread's switch interval; one step per chunk instead of one per row keeps that off the
# writer's path. A chunk of _PAD_ROWS rows or more is padded to a multiple of _PAD_ROWS by
# repeating its last row (an upsert and a delete that change nothing), so that a handful of
# statement texts are prepared and cached rather than one per batch size. A smaller chunk
# is written as it is: a repeated row is not free (about 4 us each, an upsert rewriting the
# row it just wrote), and padding one durable call's outcome to 8 rows doubled the cost of
# its transaction (57 us of CPU against 27 written alone). Sizes 1 to 7 add 7 statement
# texts per kind, well within the connection's statement cache (128).
_CHUNK_ROWS = 128  # 896 parameters: under SQLite's oldest limit (999)
_CALL_CHUNK_ROWS = 96  # 960 parameters (10 per call)
_PAD_ROWS = 8


def _values(width: int, rows: int) -> str:
    """``rows`` placeholder rows of ``width`` parameters, for a multi-row ``VALUES``."""
    return ", ".join([f"({', '.join(['?'] * width)})"] * rows)


@functools.cache
def _upsert_records(rows: int) -> str:
    values = _values(7, rows)
    return (
        f"INSERT INTO action_log_records ({_ID}, epoch, payload) VALUES {values}"
        f" ON CONFLICT ({_ID}) DO UPDATE SET epoch = excluded.epoch, payload = excluded.payload"
    )


@functools.cache
def _delete_calls(rows: int) -> str:
    # The CROSS JOIN keeps the listed identities as the outer loop: one primary-key probe
    # each, never a scan of the calls table.
    values = _values(5, rows)
    return (
        f"WITH done ({_ID}) AS (VALUES {values}) DELETE FROM action_log_calls WHERE rowid IN"
        f" (SELECT c.rowid FROM done CROSS JOIN action_log_calls AS c USING ({_ID}))"
    )


@functools.cache
def _insert_calls(rows: int) -> str:
    values = _values(10, rows)
    # OR REPLACE: a padded batch repeats its last call (the rows above its index are gone).
    return (
        f"INSERT OR REPLACE INTO action_log_calls ({_ID}, call_index, function, args_digest,"
        f" epoch, payload) VALUES {values}"
    )


@functools.cache
def _delete_calls_from(rows: int) -> str:
    # Each listed identity's calls at or above the listed index; one primary-key probe per
    # identity, as in ``_delete_calls``.
    values = _values(6, rows)
    return (
        f"WITH new ({_ID}, call_index) AS (VALUES {values}) DELETE FROM action_log_calls"
        f" WHERE rowid IN (SELECT c.rowid FROM new CROSS JOIN action_log_calls AS c"
        f" USING ({_ID}) WHERE c.call_index >= new.call_index)"
    )


def _call_rows(calls: Sequence[EncodedCall]) -> list[Any]:
    """The parameters of ``_insert_calls`` for ``calls``."""
    rows: list[Any] = []
    for identity, call, epoch, payload, _fresh in calls:
        rows += (*_key(identity), call.index, call.function, call.args_digest, epoch, payload)
    return rows


def _padded(records: Sequence[Any]) -> Sequence[Any]:
    """``records`` with the last repeated up to a multiple of ``_PAD_ROWS``; fewer than
    ``_PAD_ROWS`` as they are."""
    if len(records) < _PAD_ROWS:
        return records
    missing = -len(records) % _PAD_ROWS
    return [*records, *[records[-1]] * missing] if missing else records


def _path_of(path_or_url: str | Path) -> str:
    text = str(path_or_url)
    return text[len("sqlite://") :] if text.startswith("sqlite://") else text


def _file_id(path: str) -> tuple[int, int] | None:
    """Which file ``path`` names now (device and inode), None if none."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return None
    return (status.st_dev, status.st_ino)


def _key(identity: ActionIdentity) -> tuple[str, str, int, int, str]:
    return (identity.job, identity.key, identity.run_sequence, identity.step, identity.action)


class SqliteActionLog(ActionLog):
    """An ``ActionLog`` in a SQLite file.

    Args:
        path_or_url: a file path or ``sqlite:///abs/path.db``; missing parent directories
            are created. ``:memory:`` gives a private, non-durable database.
        serializer: how payloads become bytes (pickle by default).
    """

    def __init__(self, path_or_url: str | Path, serializer: Serializer | None = None) -> None:
        self.path = _path_of(path_or_url)
        self.serializer = serializer or PickleSerializer()
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = sqlite3.connect(
            self.path,
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,  # transactions are explicit below
            check_same_thread=False,  # shared by threads, serialized by self._lock
        )
        self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        # Takes effect only in a new, empty file (before WAL mode is switched on, which
        # writes the file's header); an older file keeps auto-vacuum off.
        self._db.execute("PRAGMA auto_vacuum = INCREMENTAL")
        _use_wal(self._db)
        self._db.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
        # WAL with NORMAL is durable against process crashes, which is what Flink recovery
        # is about; only an OS crash may lose the last transactions.
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._file = None if self.path == ":memory:" else _file_id(self.path)

    @property
    def name(self) -> str:
        return f"sqlite://{self.path}"

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            db = self._connection()
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                if db.in_transaction:  # SQLite already rolled back after e.g. a full disk
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._connection()

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("the action log is closed")
        if self._file is not None and _file_id(self.path) != self._file:
            raise sqlite3.OperationalError(
                f"the database file {self.path} was deleted or replaced after it was opened"
            )
        return self._db

    def setup(self) -> None:
        with self._write() as db:
            db.execute("CREATE TABLE IF NOT EXISTS action_log_schema (version INTEGER NOT NULL)")
            row = db.execute("SELECT MAX(version) FROM action_log_schema").fetchone()
            version = row[0] or 0
            for statements in MIGRATIONS[version:]:
                for statement in statements:
                    db.execute(statement)
            if version < len(MIGRATIONS):
                db.execute("DELETE FROM action_log_schema")
                db.execute("INSERT INTO action_log_schema VALUES (?)", (len(MIGRATIONS),))

    def completed(self, identity: ActionIdentity) -> ActionRecord | None:
        with self._read() as db:
            row = db.execute(
                f"SELECT epoch, payload FROM action_log_records WHERE {_WHERE_ID}", _key(identity)
            ).fetchone()
        if row is None:
            return None
        return decode_record(self.serializer, identity, row[0], row[1])

    def calls(self, identity: ActionIdentity) -> list[DurableCall]:
        with self._read() as db:
            rows = db.execute(
                f"SELECT payload FROM action_log_calls WHERE {_WHERE_ID} ORDER BY call_index",
                _key(identity),
            ).fetchall()
        return [decode_call(self.serializer, row[0]) for row in rows]

    def run_index(self, job: str) -> dict[str, int]:
        with self._read() as db:
            # One statement: both tables are read from the same snapshot.
            rows = db.execute(_RUN_INDEX, (job, job)).fetchall()
        return {key: int(sequence) for key, sequence in rows}

    def jobs(self) -> list[str]:
        with self._read() as db:
            rows = db.execute(
                "SELECT job FROM action_log_records UNION SELECT job FROM action_log_calls"
                " ORDER BY job"
            ).fetchall()
        return [row[0] for row in rows]

    def key_records(self, job: str, key: str) -> list[ActionRecord]:
        with self._read() as db:
            rows = db.execute(
                "SELECT run_sequence, step, action, epoch, payload FROM action_log_records"
                " WHERE job = ? AND run_key = ? ORDER BY run_sequence, step, action",
                (job, key),
            ).fetchall()
        return [
            decode_record(self.serializer, ActionIdentity(job, key, *row[:3]), row[3], row[4])
            for row in rows
        ]

    def key_interrupted(self, job: str, key: str) -> list[InterruptedAction]:
        with self._read() as db:
            rows = db.execute(
                "SELECT run_sequence, step, action, epoch, payload FROM action_log_calls"
                " WHERE job = ? AND run_key = ? ORDER BY run_sequence, step, action, call_index",
                (job, key),
            ).fetchall()
        return interrupted_actions(self.serializer, job, key, rows)

    def record_call(self, identity: ActionIdentity, call: DurableCall, epoch: int) -> None:
        self.record_calls((self.encode_call(identity, call, epoch),))

    def record_calls(self, calls: Sequence[EncodedCall]) -> None:
        if not calls:
            return
        # Multi-row statements, as in ``complete_many`` (the sqlite3 module gives up the GIL
        # at every statement step, and each time the thread wants it back the operator
        # thread may wait for it): the calls at or above each new call's index go (unless
        # every call of the chunk is fresh), the new calls go in, and only an identity with
        # earlier calls (index above 0) gets its epochs raised to their largest.
        if len(calls) <= _CALL_CHUNK_ROWS and all(c.fresh and not c.call.index for c in calls):
            # Each is its action's first call, and no earlier execution left any: one
            # statement, its own transaction, instead of four (BEGIN, DELETE, INSERT, COMMIT).
            chunk = _padded(calls)
            with self._lock:
                self._connection().execute(_insert_calls(len(chunk)), _call_rows(chunk))
            return
        with self._write() as db:  # one transaction for all of them
            for start in range(0, len(calls), _CALL_CHUNK_ROWS):
                chunk = _padded(calls[start : start + _CALL_CHUNK_ROWS])
                if not all(encoded.fresh for encoded in chunk):
                    deletes: list[Any] = []
                    for identity, call, *_ in chunk:
                        deletes += (*_key(identity), call.index)
                    db.execute(_delete_calls_from(len(chunk)), deletes)
                db.execute(_insert_calls(len(chunk)), _call_rows(chunk))
            for identity, call, *_ in calls:
                if call.index:
                    key = _key(identity)
                    db.execute(
                        "UPDATE action_log_calls SET epoch = (SELECT MAX(epoch) FROM"
                        f" action_log_calls WHERE {_WHERE_ID}) WHERE {_WHERE_ID}",
                        (*key, *key),
                    )

    def complete_many(self, records: Sequence[EncodedRecord]) -> None:
        if not records:
            return
        with self._write() as db:  # one transaction for the whole batch
            for start in range(0, len(records), _CHUNK_ROWS):
                chunk = _padded(records[start : start + _CHUNK_ROWS])
                upserts: list[Any] = []
                deletes: list[Any] = []
                for record in chunk:
                    i = record.identity
                    key = (i.job, i.key, i.run_sequence, i.step, i.action)
                    upserts += key
                    upserts += (record.epoch, record.payload)
                    deletes += key
                db.execute(_upsert_records(len(chunk)), upserts)
                db.execute(_delete_calls(len(chunk)), deletes)

    def prune(self, job: str, before_epoch: int) -> int:
        with self._write() as db:
            # All partial calls of one identity share an epoch (see record_call), so counting
            # distinct identities counts whole interrupted actions.
            partial = db.execute(
                f"SELECT COUNT(*) FROM (SELECT DISTINCT {_ID} FROM action_log_calls"
                " WHERE job = ? AND epoch < ?)",
                (job, before_epoch),
            ).fetchone()[0]
            db.execute(
                "DELETE FROM action_log_calls WHERE job = ? AND epoch < ?", (job, before_epoch)
            )
            removed = db.execute(
                "DELETE FROM action_log_records WHERE job = ? AND epoch < ?", (job, before_epoch)
            ).rowcount
        return removed + partial

    def forget_key(self, key: str) -> int:
        with self._lock:
            # Deleted rows' bytes are overwritten with zeros, not left in free pages.
            self._connection().execute("PRAGMA secure_delete = ON")
        try:
            with self._write() as db:
                jobs = [job for (job,) in db.execute(_EVERY_JOB)]
                removed = 0
                for job in jobs:  # (served by the primary keys: job, run_key, ...)
                    removed += db.execute(
                        f"SELECT COUNT(*) FROM (SELECT DISTINCT {_ID} FROM action_log_calls"
                        " WHERE job = ? AND run_key = ?)",
                        (job, key),
                    ).fetchone()[0]
                    db.execute(
                        "DELETE FROM action_log_calls WHERE job = ? AND run_key = ?", (job, key)
                    )
                    removed += db.execute(
                        "DELETE FROM action_log_records WHERE job = ? AND run_key = ?",
                        (job, key),
                    ).rowcount
        finally:
            with self._lock:
                db = self._connection()
                db.execute("PRAGMA secure_delete = OFF")
                # The write-ahead file still holds the pages as they were: copy the new
                # ones into the database and empty it (waiting for readers, as
                # ``reclaim_space(full=True)`` does).
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return removed

    def add_spend(self, scope: str, window_start_ms: int, spent: Spent) -> Spent:
        row = (scope, window_start_ms, spent.tokens, spent.cost, spent.calls)
        with self._write() as db:
            tokens, cost, calls = db.execute(_ADD_SPEND, row).fetchone()
            db.execute(_DROP_SPEND, (scope, window_start_ms))
        return Spent(tokens, cost, calls)

    def spend(self, scope: str, window_start_ms: int) -> Spent:
        with self._read() as db:
            row = db.execute(_SPEND, (scope, window_start_ms)).fetchone()
        return Spent() if row is None else Spent(*row)

    def pace(self, scope: str, advance_ms: float, now_ms: float) -> float:
        with self._write() as db:
            (next_ms,) = db.execute(
                _PACE, (scope, now_ms + advance_ms, now_ms, advance_ms)
            ).fetchone()
        return next_ms - advance_ms

    def mark_job(self, marker: JobMarker) -> None:
        with self._lock:  # one statement: its own transaction
            self._connection().execute(_MARK_JOB, _marker_row(marker))

    def expire_jobs(self, now_ms: int) -> dict[str, int]:
        with self._read() as db:  # the markers alone: most calls end here
            candidates = db.execute(_UNSEEN_JOBS, (now_ms,)).fetchall()
        if not candidates:
            return {}
        removed: dict[str, int] = {}
        with self._write() as db:  # checked again under the write lock: mark_job waits
            for (job,) in candidates:
                row = db.execute(f"{_MARKER} WHERE job = ?", (job,)).fetchone()
                if row is None or row[2] >= now_ms - row[1]:
                    continue  # gone already, or an attempt marked it since
                generated, retention_ms, _seen_ms = row
                since = now_ms - retention_ms if generated else _NEVER
                if db.execute(_HOLDS_SINCE, (job, since) * 2).fetchone()[0]:
                    continue  # a row within the window, or any row of a pinned job
                if generated:
                    removed[job] = self._delete_job(db, job)
                db.execute("DELETE FROM action_log_jobs WHERE job = ?", (job,))
        if removed:
            self.reclaim_space()
        return removed

    @staticmethod
    def _delete_job(db: sqlite3.Connection, job: str) -> int:
        partial = db.execute(
            f"SELECT COUNT(*) FROM (SELECT DISTINCT {_ID} FROM action_log_calls WHERE job = ?)",
            (job,),
        ).fetchone()[0]
        db.execute("DELETE FROM action_log_calls WHERE job = ?", (job,))
        return partial + db.execute("DELETE FROM action_log_records WHERE job = ?", (job,)).rowcount

    def job_summaries(self) -> list[JobSummary]:
        with self._read() as db:
            db.execute("BEGIN")  # the three statements read one snapshot
            try:
                records = db.execute(_RECORDS_PER_JOB).fetchall()
                interrupted = db.execute(_INTERRUPTED_PER_JOB).fetchall()
                markers = db.execute(f"SELECT job, {_MARKER_COLUMNS} FROM action_log_jobs")
                markers = markers.fetchall()
            finally:
                db.execute("COMMIT")
        return job_summaries(records, interrupted, markers)

    def storage_bytes(self) -> int | None:
        if self.path == ":memory:":
            return None
        files = (Path(self.path), Path(f"{self.path}-wal"))
        return sum(file.stat().st_size for file in files if file.exists())

    def reclaim_space(self, full: bool = False) -> None:
        with self._lock:
            db = self._connection()
            if full and db.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:  # not incremental
                # A file made before auto-vacuum: rewritten once, with it on from now on.
                db.execute("PRAGMA auto_vacuum = INCREMENTAL")  # applied by the VACUUM
                db.execute("VACUUM")
            else:
                # Each step of the pragma frees one page, and ``execute`` takes one step:
                # ``executescript`` runs it to the end. Nothing happens with auto-vacuum off.
                db.executescript("PRAGMA incremental_vacuum;")
            # The file shrinks when the WAL is checkpointed. PASSIVE never waits for readers;
            # TRUNCATE (by hand: ``full``) waits for them, then empties the WAL file too.
            db.execute(f"PRAGMA wal_checkpoint({'TRUNCATE' if full else 'PASSIVE'})")

    def count(self, job: str) -> int:
        with self._read() as db:
            # One statement, so both counts come from the same snapshot.
            return db.execute(
                "SELECT (SELECT COUNT(*) FROM action_log_records WHERE job = ?)"
                f" + (SELECT COUNT(*) FROM (SELECT DISTINCT {_ID} FROM action_log_calls"
                " WHERE job = ?))",
                (job, job),
            ).fetchone()[0]

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def _use_wal(db: sqlite3.Connection) -> None:
    """Switch the database to WAL mode (it stays so in the file). The switch needs the file
    to itself, and SQLite reports a busy file at once here instead of calling the busy
    handler: subtasks opening a new log together (threads of one worker or processes of one
    machine) would fail with "database is locked". So it is retried until the busy timeout,
    as any other statement waits."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            busy = error.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
            if not busy or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
