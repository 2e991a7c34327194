"""SQLite specifics: file handling, WAL, migrations and several processes on one file."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from flink_agents.memory import MemoryDelta
from flink_agents.runtime.action_log import ActionRecord, JobMarker
from flink_agents.runtime.action_log.sqlite import MIGRATIONS, SqliteActionLog
from tests.runtime.action_log.records import ident

REPO = Path(__file__).resolve().parents[3]

WRITER = """
import sys
from flink_agents.memory import MemoryDelta
from flink_agents.runtime.action_log import ActionIdentity, ActionRecord, DurableCall
from flink_agents.runtime.action_log.sqlite import SqliteActionLog

path, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with SqliteActionLog(path) as log:
    log.setup()
    for step in range(n):
        identity = ActionIdentity("job-1", name, 1, step, "act")
        log.record_call(identity, DurableCall(0, "f", "d", result=step), epoch=1)
        log.complete(ActionRecord(identity, MemoryDelta(), MemoryDelta(), (), (), epoch=1))
"""


def test_url_and_parent_directories(tmp_path: Path) -> None:
    """A sqlite:/// URL names an absolute path whose missing parents are created."""
    path = tmp_path / "a" / "b" / "actions.db"
    with SqliteActionLog(f"sqlite://{path}") as log:
        log.setup()
        assert log.path == str(path)
    assert path.exists()


def test_wal_mode_and_schema_version(tmp_path: Path) -> None:
    """The file is in WAL mode and records the latest schema version, once."""
    path = tmp_path / "actions.db"
    for _ in range(2):
        with SqliteActionLog(path) as log:
            log.setup()
            log.setup()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("SELECT version FROM action_log_schema").fetchall() == [(len(MIGRATIONS),)]
    db.close()


def test_processes_write_the_same_file_concurrently(tmp_path: Path) -> None:
    """Several processes writing one file at once all land (the busy timeout waits)."""
    path, per_process = tmp_path / "shared.db", 40
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), f"p{n}", str(per_process)],
            cwd=REPO,
            stderr=subprocess.PIPE,
        )
        for n in range(3)
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=60)
        assert writer.returncode == 0, err.decode()
    with SqliteActionLog(path) as log:
        log.setup()
        assert log.count("job-1") == 3 * per_process
        assert log.calls(ident(key="p1", step=5)) == []
        assert log.completed(ident(key="p2", step=39)) is not None


def test_a_deleted_or_replaced_file_is_an_error_not_a_silent_loss(tmp_path: Path) -> None:
    """An open SQLite connection would keep writing to the unlinked file; the log refuses."""
    path = tmp_path / "actions.db"
    with SqliteActionLog(path) as log, SqliteActionLog(path) as other:
        log.setup()
        for name in ("actions.db", "actions.db-wal", "actions.db-shm"):
            (tmp_path / name).unlink(missing_ok=True)
        with pytest.raises(sqlite3.OperationalError, match="deleted or replaced"):
            log.count("job-1")
        with SqliteActionLog(path) as replacement:  # a new file at the same path
            replacement.setup()
        with pytest.raises(sqlite3.OperationalError, match="deleted or replaced"):
            other.count("job-1")


# The schema of every SQLite log written before job markers (schema version 1, until
# 2026-11-28), as those versions created it: the golden layout a newer version must read.
SCHEMA_V1 = """
CREATE TABLE action_log_schema (version INTEGER NOT NULL);
INSERT INTO action_log_schema VALUES (1);
CREATE TABLE action_log_records (
    job TEXT NOT NULL, run_key TEXT NOT NULL, run_sequence INTEGER NOT NULL,
    step INTEGER NOT NULL, action TEXT NOT NULL,
    epoch INTEGER NOT NULL, payload BLOB NOT NULL,
    PRIMARY KEY (job, run_key, run_sequence, step, action));
CREATE INDEX action_log_records_epoch ON action_log_records (job, epoch);
CREATE TABLE action_log_calls (
    job TEXT NOT NULL, run_key TEXT NOT NULL, run_sequence INTEGER NOT NULL,
    step INTEGER NOT NULL, action TEXT NOT NULL, call_index INTEGER NOT NULL,
    function TEXT NOT NULL, args_digest TEXT NOT NULL,
    epoch INTEGER NOT NULL, payload BLOB NOT NULL,
    PRIMARY KEY (job, run_key, run_sequence, step, action, call_index));
CREATE INDEX action_log_calls_epoch ON action_log_calls (job, epoch);
"""


def old_log(path: Path, jobs: int, payload: bytes = b"") -> None:
    """A file as a version before job markers left it: records of ``jobs`` jobs at epoch 0,
    auto-vacuum off, WAL mode on. The payloads are golden bytes (test_payloads.py)."""
    from tests.runtime.action_log.test_payloads import UNTIMED_CALL, UNTIMED_RECORD

    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.executescript(SCHEMA_V1)
    db.execute("BEGIN")
    for n in range(jobs):
        job = f"{n:032x}"  # the look of a generated name: a marker, not a name, decides
        for step in range(3):
            key = (job, '"k1"', 1, step, "act")
            db.execute(
                "INSERT INTO action_log_records VALUES (?, ?, ?, ?, ?, 0, ?)",
                (*key, UNTIMED_RECORD + payload),
            )
        key = (job, '"k1"', 1, 9, "act")
        db.execute(
            "INSERT INTO action_log_calls VALUES (?, ?, ?, ?, ?, 0, 'llm', 'd0', 0, ?)",
            (*key, UNTIMED_CALL),
        )
    db.execute("COMMIT")
    db.close()


def test_a_log_written_before_job_markers_reads_back_and_is_never_expired(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    old_log(path, jobs=2)
    with SqliteActionLog(path) as log:
        log.setup()
        job = f"{0:032x}"
        assert log.completed(ident(job=job, key='"k1"', step=2)).short_term.puts == {"a": 1}
        assert [c.result for c in log.calls(ident(job=job, key='"k1"', step=9))] == ["r0"]
        assert log.expire_jobs(now_ms=10**15) == {}
        summaries = log.job_summaries()
        assert [(s.records, s.interrupted, s.newest_ms, s.marker) for s in summaries] == [
            (3, 1, 0, None)
        ] * 2
    db = sqlite3.connect(path)
    assert db.execute("SELECT version FROM action_log_schema").fetchall() == [(len(MIGRATIONS),)]
    db.close()


def test_a_version_before_job_markers_still_opens_and_writes_a_newer_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older version (which knows schema 1 only) opens a file a newer one set up: it
    ignores the markers table and leaves the version alone; its jobs carry no marker."""
    path = tmp_path / "new.db"
    with SqliteActionLog(path) as log:
        log.setup()
    import flink_agents.runtime.action_log.sqlite as sqlite_module

    monkeypatch.setattr(sqlite_module, "MIGRATIONS", MIGRATIONS[:1])
    with SqliteActionLog(path) as old:
        old.setup()
        old.complete_many([old.encode(record_of("old-job"))])
    monkeypatch.undo()
    with SqliteActionLog(path) as log:
        log.setup()
        assert [s.marker for s in log.job_summaries()] == [None]
        assert log.expire_jobs(now_ms=10**15) == {}
        assert log.count("old-job") == 1
    db = sqlite3.connect(path)
    assert db.execute("SELECT version FROM action_log_schema").fetchall() == [(len(MIGRATIONS),)]
    db.close()


def record_of(job: str) -> ActionRecord:
    return ActionRecord(ident(job=job), MemoryDelta(), MemoryDelta(), (), (), epoch=0)


def test_expiring_gives_the_space_back_to_the_file_system(tmp_path: Path) -> None:
    """A new file is made with incremental auto-vacuum: the pages of expired jobs leave the
    file, not only their rows."""
    path = tmp_path / "actions.db"
    with SqliteActionLog(path) as log:
        log.setup()
        for n in range(20):
            job = f"job-{n}"
            log.mark_job(JobMarker(job, True, 1_000, 0))
            for step in range(10):
                big = ActionRecord(
                    ident(job=job, step=step),
                    MemoryDelta(),
                    MemoryDelta(puts={"a": "x" * 50_000}),
                    (),
                    (),
                    epoch=0,
                )
                log.complete(big)
        log.reclaim_space()
        full = path.stat().st_size
        assert full > 20 * 10 * 50_000
        assert len(log.expire_jobs(now_ms=10_000)) == 20
        assert path.stat().st_size < full // 20
        assert log.job_summaries() == []


def test_a_full_reclaim_shrinks_an_old_file_and_turns_auto_vacuum_on(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old_log(path, jobs=30, payload=b"x" * 20_000)
    with SqliteActionLog(path) as log:
        log.setup()
        before = path.stat().st_size
        for job in log.jobs()[:29]:
            log.prune(job, before_epoch=1)
        log.reclaim_space()  # auto-vacuum is off in this file: nothing leaves it
        assert path.stat().st_size >= before
        log.reclaim_space(full=True)
        assert path.stat().st_size < before // 10
        assert log.count(f"{29:032x}") == 4
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental from now on
    db.close()
