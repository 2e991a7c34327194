"""How a log names itself in error messages: its URL, never a password."""

from __future__ import annotations

import pytest

from flink_agents.runtime.action_log import InMemoryActionLog
from flink_agents.runtime.action_log._base import redact_secrets
from flink_agents.runtime.action_log.postgres import PostgresActionLog
from flink_agents.runtime.action_log.sqlite import SqliteActionLog


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("postgresql://user:secret@host/db", "postgresql://user:***@host/db"),
        ("postgres://u:p%40ss@db.internal:5432/agents", "postgres://u:***@db.internal:5432/agents"),
        ("postgresql://:secret@host/db", "postgresql://:***@host/db"),
        ("postgresql://user@host/db", "postgresql://user@host/db"),
        (
            "postgresql://user@host/db?password=secret&x=1",
            "postgresql://user@host/db?password=***&x=1",
        ),
        ("host=h user=u password=secret dbname=d", "host=h user=u password=*** dbname=d"),
        ("host=h PASSWORD = 'se cret' dbname=d", "host=h PASSWORD = *** dbname=d"),
        ("failed at postgresql://a:b@h/d, retrying", "failed at postgresql://a:***@h/d, retrying"),
        ("sqlite:///var/data/action-log.db", "sqlite:///var/data/action-log.db"),
    ],
)
def test_redact_secrets_masks_passwords(text: str, shown: str) -> None:
    assert redact_secrets(text) == shown


def test_postgres_log_name_and_messages_hide_its_password() -> None:
    """No connection is made: the name is known before the database is reached."""
    log = PostgresActionLog("postgresql://agents:Tr0ub4dor@db.internal:5432/agents")
    assert log.name == "postgresql://agents:***@db.internal:5432/agents"
    assert log.redact("auth failed with Tr0ub4dor for agents") == "auth failed with *** for agents"
    conninfo = PostgresActionLog("host=db user=agents password=Tr0ub4dor dbname=agents")
    assert conninfo.name == "host=db user=agents password=*** dbname=agents"
    assert "Tr0ub4dor" not in conninfo.redact("echo: Tr0ub4dor")


def test_sqlite_and_memory_log_names(tmp_path) -> None:
    with SqliteActionLog(tmp_path / "action-log.db") as log:
        assert log.name == f"sqlite://{tmp_path}/action-log.db"
    assert InMemoryActionLog().name == "memory://"
