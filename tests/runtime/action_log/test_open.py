"""open_action_log picks the backend from a URL; the public names are pinned."""

from __future__ import annotations

from pathlib import Path

import pytest

import flink_agents.runtime.action_log as action_log
from flink_agents.runtime.action_log import InMemoryActionLog, open_action_log
from flink_agents.runtime.action_log.postgres import PostgresActionLog
from flink_agents.runtime.action_log.sqlite import SqliteActionLog
from tests.runtime.action_log.conftest import PostgresServer
from tests.runtime.action_log.records import ident


def test_public_names_are_pinned() -> None:
    """The facade exports exactly these names (change on purpose only)."""
    assert sorted(action_log.__all__) == [
        "ActionIdentity",
        "ActionLog",
        "ActionLogError",
        "ActionRecord",
        "DurableCall",
        "EncodedRecord",
        "InMemoryActionLog",
        "PickleSerializer",
        "RecordedError",
        "Serializer",
        "UnstorableValueError",
        "digest_args",
        "external_id",
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
