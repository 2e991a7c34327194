"""SQLite specifics: file handling, WAL, migrations and several processes on one file."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

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
