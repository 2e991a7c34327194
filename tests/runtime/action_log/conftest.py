"""Fixtures: a fresh action log of every backend per test (the PostgreSQL server is the
session fixture ``postgres_server`` of tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from flink_agents.runtime.action_log import ActionLog, InMemoryActionLog
from flink_agents.testing.postgres import PostgresServer

__all__ = ["Backend", "PostgresServer"]  # PostgresServer: the tests here import it from here


@dataclass
class Backend:
    """How to open (another connection to) one fresh store of one backend."""

    name: str
    opener: Callable[[], ActionLog]
    opened: list[ActionLog] = field(default_factory=list)

    def open(self) -> ActionLog:
        """A set-up log over the same store, as another thread or process would open it."""
        log = self.opener()
        log.setup()
        self.opened.append(log)
        return log

    def close_all(self) -> None:
        for log in self.opened:
            log.close()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """A fresh store for each test, of every backend."""
    if request.param == "memory":
        shared = InMemoryActionLog()  # one process-local store: every "open" shares it
        made = Backend("memory", lambda: shared)
    elif request.param == "sqlite":
        from flink_agents.runtime.action_log.sqlite import SqliteActionLog

        path = tmp_path / "logs" / "actions.db"
        made = Backend("sqlite", lambda: SqliteActionLog(path))
    else:
        from flink_agents.runtime.action_log.postgres import PostgresActionLog

        url = request.getfixturevalue("postgres_server").create_database()
        made = Backend("postgres", lambda: PostgresActionLog(url))
    try:
        yield made
    finally:
        made.close_all()


@pytest.fixture
def log(backend: Backend) -> ActionLog:
    """A set-up, empty action log of the parametrized backend."""
    return backend.open()
