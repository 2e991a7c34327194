"""open_action_log picks the backend from a URL; the public names are pinned."""

from __future__ import annotations

from pathlib import Path

import pytest

import flink_agents.runtime.action_log as action_log
from flink_agents.runtime.action_log import ActionLogError, InMemoryActionLog, open_action_log
from flink_agents.runtime.action_log.postgres import PostgresActionLog
from flink_agents.runtime.action_log.sqlite import SqliteActionLog
from flink_agents.testing import free_port
from tests.runtime.action_log.conftest import PostgresServer
from tests.runtime.action_log.records import ident


def test_public_names_are_pinned() -> None:
    """The facade exports exactly these names (change on purpose only)."""
    assert sorted(action_log.__all__) == [
        "ActionEntry",
        "ActionIdentity",
        "ActionLog",
        "ActionLogError",
        "ActionRecord",
        "DurableCall",
        "EncodedCall",
        "EncodedRecord",
        "InMemoryActionLog",
        "InterruptedAction",
        "JobHeartbeat",
        "JobMarker",
        "JobSummary",
        "KeyHistory",
        "MemoryChange",
        "PickleSerializer",
        "RecordedError",
        "RunHistory",
        "Serializer",
        "Spent",
        "UnstorableValueError",
        "digest_args",
        "external_id",
        "key_history",
        "open_action_log",
    ]


def test_memory_and_sqlite_urls(tmp_path: Path) -> None:
    """memory://, sqlite:/// URLs and plain paths open the right, set-up backend."""
    with open_action_log("memory://") as log:
        assert isinstance(log, InMemoryActionLog)
    for url in (f"sqlite://{tmp_path}/a/x.db", tmp_path / "b" / "y.db", str(tmp_path / "z.db")):
        with open_action_log(url) as log:
            assert isinstance(log, SqliteActionLog)
            assert log.count("job-1") == 0  # tables exist: setup() ran


def test_postgres_url(postgres_server: PostgresServer) -> None:
    """A postgresql:// URL opens a set-up PostgreSQL log."""
    with open_action_log(postgres_server.create_database()) as log:
        assert isinstance(log, PostgresActionLog)
        assert log.completed(ident()) is None


def test_unknown_scheme_is_rejected() -> None:
    """A URL no backend handles raises a ValueError naming the accepted forms."""
    with pytest.raises(ValueError, match="memory://"):
        open_action_log("redis://localhost")


def test_a_postgres_log_that_cannot_be_reached_is_an_action_log_error() -> None:
    """Nothing listens on the port: the log's own error, naming it, password redacted."""
    url = f"postgresql://agents:s3cret-pw@127.0.0.1:{free_port()}/agents"
    with pytest.raises(ActionLogError) as raised:
        open_action_log(url)
    message = str(raised.value)
    shown = url.replace("s3cret-pw", "***")
    assert message.startswith(f"action log {shown}: opening failed: OperationalError: ")
    assert "s3cret-pw" not in message


def test_a_sqlite_log_whose_directory_cannot_be_made_is_an_action_log_error(
    tmp_path: Path,
) -> None:
    (tmp_path / "a-file").write_text("")
    path = tmp_path / "a-file" / "log.db"
    with pytest.raises(ActionLogError, match=rf"^action log {path}: opening failed: \w+Error"):
        open_action_log(path)


def test_subtasks_opening_a_new_sqlite_log_together_all_open_it(tmp_path):
    """Switching a new file to WAL mode needs it to itself, and SQLite answers "database is
    locked" at once there instead of waiting: the log retries as any statement waits."""
    import threading

    for trial in range(40):
        url = f"sqlite:///{tmp_path}/log-{trial}.db"
        errors: list[BaseException] = []
        barrier = threading.Barrier(8)

        def open_and_close(url=url, errors=errors, barrier=barrier) -> None:
            barrier.wait()
            try:
                open_action_log(url).close()
            except Exception as error:
                errors.append(error)

        threads = [threading.Thread(target=open_and_close) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == [], f"trial {trial}: {errors[0]}"
