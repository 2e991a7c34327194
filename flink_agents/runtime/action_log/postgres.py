"""The shared backend for clusters: PostgreSQL through psycopg 3 (imported only here).

Every task manager of a job writes to the same database, so the log survives losing any of
them. One connection per log, shared by the threads of a process behind a lock; writes are
single transactions, and every operation is idempotent, so after a dropped connection the
operation is retried once on a new one.

Space: rows that ``prune`` or ``expire_jobs`` delete are reclaimed for new rows by
PostgreSQL's autovacuum, so the tables stay bounded with their rows; ``reclaim_space`` runs
a plain ``VACUUM`` at once (``flink-agents log prune``), also with ``full=True``: ``VACUUM
FULL`` would lock the tables against every job while it rewrites them, a decision left to
the database's administrator.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict

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
    redact_secrets,
)

T = TypeVar("T")

_SETUP_LOCK = 0x666C696E6B5F616C  # pg_advisory_xact_lock key: concurrent setup() calls queue
_ID = "job, run_key, run_sequence, step, action"
_WHERE_ID = "job = %s AND run_key = %s AND run_sequence = %s AND step = %s AND action = %s"

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        f"""CREATE TABLE action_log_records (
            job TEXT NOT NULL, run_key TEXT NOT NULL, run_sequence BIGINT NOT NULL,
            step BIGINT NOT NULL, action TEXT NOT NULL,
            epoch BIGINT NOT NULL, payload BYTEA NOT NULL,
            PRIMARY KEY ({_ID}))""",
        "CREATE INDEX action_log_records_epoch ON action_log_records (job, epoch)",
        f"""CREATE TABLE action_log_calls (
            job TEXT NOT NULL, run_key TEXT NOT NULL, run_sequence BIGINT NOT NULL,
            step BIGINT NOT NULL, action TEXT NOT NULL, call_index INTEGER NOT NULL,
            function TEXT NOT NULL, args_digest TEXT NOT NULL,
            epoch BIGINT NOT NULL, payload BYTEA NOT NULL,
            PRIMARY KEY ({_ID}, call_index))""",
        "CREATE INDEX action_log_calls_epoch ON action_log_calls (job, epoch)",
    ),
    (  # 2: job markers (2026-11-28), for expire_jobs; older versions ignore the table
        """CREATE TABLE action_log_jobs (
            job TEXT NOT NULL PRIMARY KEY, generated BOOLEAN NOT NULL,
            retention_ms BIGINT NOT NULL, seen_ms BIGINT NOT NULL)""",
    ),
    (  # 3: budgets' spend per window and shared rate limits' pace (2026-11-29), for add_spend
        # and pace; older versions ignore them
        """CREATE TABLE action_log_spend (
            scope TEXT NOT NULL, window_start BIGINT NOT NULL, tokens BIGINT NOT NULL,
            cost DOUBLE PRECISION NOT NULL, calls BIGINT NOT NULL,
            PRIMARY KEY (scope, window_start))""",
        """CREATE TABLE action_log_pace (
            scope TEXT NOT NULL PRIMARY KEY, next_ms DOUBLE PRECISION NOT NULL)""",
    ),
)
"""Schema migrations in order: ``setup`` applies those after the stored version. Append only."""


# Budgets' spend (``add_spend``), served by the primary key (scope, window_start).
_ADD_SPEND = (
    "INSERT INTO action_log_spend (scope, window_start, tokens, cost, calls)"
    " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (scope, window_start) DO UPDATE SET"
    " tokens = action_log_spend.tokens + excluded.tokens,"
    " cost = action_log_spend.cost + excluded.cost,"
    " calls = action_log_spend.calls + excluded.calls"
    " RETURNING tokens, cost, calls"
)
_PACE = (
    "INSERT INTO action_log_pace (scope, next_ms) VALUES (%s, %s)"
    " ON CONFLICT (scope) DO UPDATE SET"
    " next_ms = GREATEST(action_log_pace.next_ms, %s) + %s RETURNING next_ms"
)
_DROP_SPEND = "DELETE FROM action_log_spend WHERE scope = %s AND window_start < %s"
_SPEND = "SELECT tokens, cost, calls FROM action_log_spend WHERE scope = %s AND window_start = %s"


# Served by the primary keys' indexes, which start with (job, run_key, run_sequence).
_RUN_INDEX = """SELECT run_key, MAX(run_sequence) FROM (
    SELECT run_key, MAX(run_sequence) AS run_sequence FROM action_log_records
    WHERE job = %s GROUP BY run_key
    UNION ALL
    SELECT run_key, MAX(run_sequence) FROM action_log_calls WHERE job = %s GROUP BY run_key
) runs GROUP BY run_key"""


# A batch is written with two statements of constant text whatever its size, each taking
# one array per column (unnest turns them back into rows): two round trips, and the
# statements are prepared once per connection.
_UPSERT_RECORDS = (
    f"INSERT INTO action_log_records ({_ID}, epoch, payload)"
    " SELECT * FROM unnest(%b::text[], %b::text[], %b::bigint[], %b::bigint[], %b::text[],"
    " %b::bigint[], %b::bytea[])"
    f" ON CONFLICT ({_ID}) DO UPDATE SET epoch = excluded.epoch, payload = excluded.payload"
)
_DELETE_CALLS = (
    "DELETE FROM action_log_calls AS c USING unnest(%b::text[], %b::text[], %b::bigint[],"
    f" %b::bigint[], %b::text[]) AS done ({_ID})"
    " WHERE c.job = done.job AND c.run_key = done.run_key"
    " AND c.run_sequence = done.run_sequence AND c.step = done.step"
    " AND c.action = done.action"
)


# Job markers (``expire_jobs``).
_TABLES = ("action_log_records", "action_log_calls", "action_log_jobs")
_MARKER_COLUMNS = "generated, retention_ms, seen_ms"
_MARK_JOB = (
    f"INSERT INTO action_log_jobs (job, {_MARKER_COLUMNS}) VALUES (%s, %s, %s, %s)"
    " ON CONFLICT (job) DO UPDATE SET generated = excluded.generated,"
    " retention_ms = excluded.retention_ms,"
    " seen_ms = GREATEST(action_log_jobs.seen_ms, excluded.seen_ms)"
)
_UNSEEN_JOBS = "SELECT job FROM action_log_jobs WHERE seen_ms < %s - retention_ms"
# Served by the (job, epoch) indexes.
_HOLDS_SINCE = (
    "SELECT EXISTS (SELECT 1 FROM action_log_records WHERE job = %s AND epoch >= %s)"
    " OR EXISTS (SELECT 1 FROM action_log_calls WHERE job = %s AND epoch >= %s)"
)
_NEVER = -(2**63)
"""An epoch below every other: ``_HOLDS_SINCE`` with it asks whether a job holds any row."""
_RECORDS_PER_JOB = (
    "SELECT job, COUNT(*), SUM(octet_length(payload)), MAX(epoch) FROM action_log_records"
    " GROUP BY job"
)
_INTERRUPTED_PER_JOB = (
    "SELECT job, COUNT(*), SUM(size), MAX(epoch) FROM (SELECT job,"
    " SUM(octet_length(payload)) AS size, MAX(epoch) AS epoch FROM action_log_calls"
    f" GROUP BY {_ID}) actions GROUP BY job"
)


def _key(identity: ActionIdentity) -> tuple[str, str, int, int, str]:
    return (identity.job, identity.key, identity.run_sequence, identity.step, identity.action)


class PostgresActionLog(ActionLog):
    """An ``ActionLog`` in PostgreSQL.

    Args:
        conninfo: a libpq connection string or ``postgresql://`` URL.
        serializer: how payloads become bytes (pickle by default).
    """

    def __init__(self, conninfo: str, serializer: Serializer | None = None) -> None:
        self.conninfo = conninfo
        self.serializer = serializer or PickleSerializer()
        self._lock = threading.Lock()
        self._closed = False
        self._conn: psycopg.Connection[Any] | None = None
        try:
            password = conninfo_to_dict(conninfo).get("password")
        except psycopg.Error:
            password = None  # a malformed string: connecting will say so
        self._secrets = (str(password),) if password else ()

    @property
    def name(self) -> str:
        return self.redact(self.conninfo)

    def redact(self, text: str) -> str:
        return redact_secrets(text, self._secrets)

    def _connection(self) -> psycopg.Connection[Any]:
        if self._closed:
            raise RuntimeError("the action log is closed")
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = psycopg.connect(self.conninfo, autocommit=True)
        return self._conn

    def _run(self, operation: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``operation`` in one transaction, once more on a new connection if it broke."""
        with self._lock:
            try:
                return self._transact(operation)
            except psycopg.OperationalError:
                if self._conn is None or not self._conn.broken:
                    raise
            return self._transact(operation)

    def _transact(self, operation: Callable[[psycopg.Connection[Any]], T]) -> T:
        conn = self._connection()
        with conn.transaction():
            return operation(conn)

    def setup(self) -> None:
        def migrate(conn: psycopg.Connection[Any]) -> None:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))
            conn.execute("CREATE TABLE IF NOT EXISTS action_log_schema (version INTEGER NOT NULL)")
            row = conn.execute("SELECT MAX(version) FROM action_log_schema").fetchone()
            version = (row[0] if row else None) or 0
            for statements in MIGRATIONS[version:]:
                for statement in statements:
                    conn.execute(statement)
            if version < len(MIGRATIONS):
                conn.execute("DELETE FROM action_log_schema")
                conn.execute("INSERT INTO action_log_schema VALUES (%s)", (len(MIGRATIONS),))

        self._run(migrate)

    def completed(self, identity: ActionIdentity) -> ActionRecord | None:
        row = self._run(
            lambda conn: conn.execute(
                f"SELECT epoch, payload FROM action_log_records WHERE {_WHERE_ID}",
                _key(identity),
            ).fetchone()
        )
        if row is None:
            return None
        return decode_record(self.serializer, identity, row[0], bytes(row[1]))

    def calls(self, identity: ActionIdentity) -> list[DurableCall]:
        rows = self._run(
            lambda conn: conn.execute(
                f"SELECT payload FROM action_log_calls WHERE {_WHERE_ID} ORDER BY call_index",
                _key(identity),
            ).fetchall()
        )
        return [decode_call(self.serializer, bytes(row[0])) for row in rows]

    def run_index(self, job: str) -> dict[str, int]:
        rows = self._run(lambda conn: conn.execute(_RUN_INDEX, (job, job)).fetchall())
        return {key: int(sequence) for key, sequence in rows}

    def jobs(self) -> list[str]:
        rows = self._run(
            lambda conn: conn.execute(
                "SELECT job FROM action_log_records UNION SELECT job FROM action_log_calls"
                " ORDER BY job"
            ).fetchall()
        )
        return [row[0] for row in rows]

    def key_records(self, job: str, key: str) -> list[ActionRecord]:
        # Actions in code-point order (COLLATE "C"), as the other backends sort them,
        # whatever the database's collation.
        rows = self._run(
            lambda conn: conn.execute(
                "SELECT run_sequence, step, action, epoch, payload FROM action_log_records"
                " WHERE job = %s AND run_key = %s"
                ' ORDER BY run_sequence, step, action COLLATE "C"',
                (job, key),
            ).fetchall()
        )
        return [
            decode_record(
                self.serializer,
                ActionIdentity(job, key, int(row[0]), int(row[1]), row[2]),
                int(row[3]),
                bytes(row[4]),
            )
            for row in rows
        ]

    def key_interrupted(self, job: str, key: str) -> list[InterruptedAction]:
        rows = self._run(
            lambda conn: conn.execute(
                "SELECT run_sequence, step, action, epoch, payload FROM action_log_calls"
                " WHERE job = %s AND run_key = %s"
                ' ORDER BY run_sequence, step, action COLLATE "C", call_index',
                (job, key),
            ).fetchall()
        )
        return interrupted_actions(self.serializer, job, key, rows)

    def record_call(self, identity: ActionIdentity, call: DurableCall, epoch: int) -> None:
        self.record_calls((self.encode_call(identity, call, epoch),))

    def record_calls(self, calls: Sequence[EncodedCall]) -> None:
        if not calls:
            return

        def write(conn: psycopg.Connection[Any]) -> None:
            # One transaction for all of them, its statements pipelined: sent in order
            # without waiting for each result (a round trip each, three per call, took
            # about 380 us per call on loopback); an error surfaces when the pipeline ends.
            with conn.pipeline():
                for identity, call, epoch, payload, _fresh in calls:
                    key = _key(identity)
                    conn.execute(
                        f"DELETE FROM action_log_calls WHERE {_WHERE_ID} AND call_index > %s",
                        (*key, call.index),
                    )
                    conn.execute(
                        f"INSERT INTO action_log_calls ({_ID}, call_index, function,"
                        " args_digest, epoch, payload)"
                        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                        f" ON CONFLICT ({_ID}, call_index) DO UPDATE SET"
                        " function = excluded.function, args_digest = excluded.args_digest,"
                        " epoch = excluded.epoch, payload = excluded.payload",
                        (*key, call.index, call.function, call.args_digest, epoch, payload),
                    )
                    conn.execute(
                        "UPDATE action_log_calls SET epoch = (SELECT MAX(epoch)"
                        f" FROM action_log_calls WHERE {_WHERE_ID}) WHERE {_WHERE_ID}",
                        (*key, *key),
                    )

        self._run(write)

    def complete_many(self, records: Sequence[EncodedRecord]) -> None:
        if not records:
            return
        # One row per identity, the later record winning: one upsert statement may not
        # touch a row twice.
        latest = {record.identity: record for record in records}.values()
        columns: tuple[list[Any], ...] = ([], [], [], [], [], [], [])
        jobs, keys, sequences, steps, actions, epochs, payloads = columns
        for record in latest:
            identity = record.identity
            jobs.append(identity.job)
            keys.append(identity.key)
            sequences.append(identity.run_sequence)
            steps.append(identity.step)
            actions.append(identity.action)
            epochs.append(record.epoch)
            payloads.append(record.payload)

        def write(conn: psycopg.Connection[Any]) -> None:
            conn.execute(_UPSERT_RECORDS, columns)
            conn.execute(_DELETE_CALLS, columns[:5])

        self._run(write)  # idempotent: after a dropped connection it runs again whole

    def prune(self, job: str, before_epoch: int) -> int:
        def delete(conn: psycopg.Connection[Any]) -> int:
            # All partial calls of one identity share an epoch (see record_call), so counting
            # distinct identities counts whole interrupted actions.
            row = conn.execute(
                f"WITH gone AS (DELETE FROM action_log_calls WHERE job = %s AND epoch < %s"
                f" RETURNING {_ID}) SELECT COUNT(*) FROM (SELECT DISTINCT {_ID} FROM gone) g",
                (job, before_epoch),
            ).fetchone()
            partial = row[0] if row else 0
            removed = conn.execute(
                "DELETE FROM action_log_records WHERE job = %s AND epoch < %s",
                (job, before_epoch),
            ).rowcount
            return partial + removed

        return self._run(delete)

    def forget_key(self, key: str) -> int:
        def delete(conn: psycopg.Connection[Any]) -> int:
            jobs = [
                job
                for (job,) in conn.execute(
                    "SELECT job FROM action_log_records UNION SELECT job FROM action_log_calls"
                )
            ]
            removed = 0
            for job in jobs:  # (served by the primary keys: job, run_key, ...)
                row = conn.execute(
                    f"WITH gone AS (DELETE FROM action_log_calls WHERE job = %s AND run_key = %s"
                    f" RETURNING {_ID}) SELECT COUNT(*) FROM (SELECT DISTINCT {_ID} FROM gone) g",
                    (job, key),
                ).fetchone()
                removed += row[0] if row else 0
                removed += conn.execute(
                    "DELETE FROM action_log_records WHERE job = %s AND run_key = %s", (job, key)
                ).rowcount
            return removed

        # (The dead tuples go at the table's next vacuum: autovacuum, or ``log reclaim``.)
        return self._run(delete)

    def add_spend(self, scope: str, window_start_ms: int, spent: Spent) -> Spent:
        row = (scope, window_start_ms, spent.tokens, spent.cost, spent.calls)

        def add(conn: psycopg.Connection[Any]) -> Spent:
            added = conn.execute(_ADD_SPEND, row).fetchone()
            conn.execute(_DROP_SPEND, (scope, window_start_ms))
            return Spent(*added) if added else Spent()

        return self._run(add)

    def spend(self, scope: str, window_start_ms: int) -> Spent:
        row = self._run(lambda conn: conn.execute(_SPEND, (scope, window_start_ms)).fetchone())
        return Spent() if row is None else Spent(*row)

    def pace(self, scope: str, advance_ms: float, now_ms: float) -> float:
        row = (scope, now_ms + advance_ms, now_ms, advance_ms)
        (next_ms,) = self._run(lambda conn: conn.execute(_PACE, row).fetchone())
        return next_ms - advance_ms

    def mark_job(self, marker: JobMarker) -> None:
        row = (marker.job, marker.generated, marker.retention_ms, marker.seen_ms)
        self._run(lambda conn: conn.execute(_MARK_JOB, row))

    def expire_jobs(self, now_ms: int) -> dict[str, int]:
        # The markers alone first: most calls end here.
        candidates = self._run(lambda conn: conn.execute(_UNSEEN_JOBS, (now_ms,)).fetchall())
        if not candidates:
            return {}

        def expire(conn: psycopg.Connection[Any]) -> dict[str, int]:
            removed: dict[str, int] = {}
            for (job,) in candidates:
                # Locked: a mark_job of this job (an attempt starting) waits for the end of
                # this transaction, or this waits for it and sees it.
                row = conn.execute(
                    f"SELECT {_MARKER_COLUMNS} FROM action_log_jobs WHERE job = %s FOR UPDATE",
                    (job,),
                ).fetchone()
                if row is None or row[2] >= now_ms - row[1]:
                    continue  # gone already, or an attempt marked it since
                generated, retention_ms, _seen_ms = row
                since = _NEVER if not generated else now_ms - retention_ms
                held = conn.execute(_HOLDS_SINCE, (job, since) * 2).fetchone()
                if held and held[0]:
                    continue  # a row within the window, or any row of a pinned job
                if generated:
                    removed[job] = _delete_job(conn, job)
                conn.execute("DELETE FROM action_log_jobs WHERE job = %s", (job,))
            return removed

        return self._run(expire)

    def job_summaries(self) -> list[JobSummary]:
        def read(conn: psycopg.Connection[Any]) -> list[JobSummary]:
            # One transaction; REPEATABLE READ so its statements read one snapshot.
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            return job_summaries(
                conn.execute(_RECORDS_PER_JOB).fetchall(),
                conn.execute(_INTERRUPTED_PER_JOB).fetchall(),
                conn.execute(f"SELECT job, {_MARKER_COLUMNS} FROM action_log_jobs").fetchall(),
            )

        return self._run(read)

    def storage_bytes(self) -> int | None:
        sizes = " + ".join(f"pg_total_relation_size('{table}')" for table in _TABLES)
        row = self._run(lambda conn: conn.execute(f"SELECT {sizes}").fetchone())
        return int(row[0]) if row else None

    def reclaim_space(self, full: bool = False) -> None:
        # VACUUM cannot run in a transaction: on the autocommit connection, outside _run's.
        # Never FULL (see the module docstring), whatever ``full`` says.
        with self._lock:
            self._connection().execute(f"VACUUM {', '.join(_TABLES)}")

    def count(self, job: str) -> int:
        row = self._run(
            lambda conn: conn.execute(
                "SELECT (SELECT COUNT(*) FROM action_log_records WHERE job = %s)"
                f" + (SELECT COUNT(*) FROM (SELECT DISTINCT {_ID} FROM action_log_calls"
                " WHERE job = %s) d)",
                (job, job),
            ).fetchone()
        )
        return int(row[0]) if row else 0

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _delete_job(conn: psycopg.Connection[Any], job: str) -> int:
    """Delete every row of ``job``; the actions removed (as ``prune`` counts them)."""
    row = conn.execute(
        f"WITH gone AS (DELETE FROM action_log_calls WHERE job = %s RETURNING {_ID})"
        f" SELECT COUNT(*) FROM (SELECT DISTINCT {_ID} FROM gone) g",
        (job,),
    ).fetchone()
    removed = conn.execute("DELETE FROM action_log_records WHERE job = %s", (job,)).rowcount
    return (row[0] if row else 0) + removed
