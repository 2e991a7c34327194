"""The action log (write-ahead log of completed actions and their durable calls).

The interface and the in-memory backend are importable here; the durable backends live in
``sqlite`` and ``postgres``, whose drivers are imported only when those modules are, so a
job that logs to SQLite does not need psycopg. ``open_action_log`` picks one from a URL.
"""

from __future__ import annotations

from pathlib import Path

from flink_agents.runtime.action_log._base import (
    ActionIdentity,
    ActionLog,
    ActionLogError,
    ActionRecord,
    DurableCall,
    EncodedRecord,
    PickleSerializer,
    RecordedError,
    Serializer,
    UnstorableValueError,
)
from flink_agents.runtime.action_log._ids import digest_args, external_id
from flink_agents.runtime.action_log._memory import InMemoryActionLog

__all__ = [
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


def open_action_log(url: str | Path, serializer: Serializer | None = None) -> ActionLog:
    """The backend ``url`` names, set up and ready.

    Args:
        url: ``memory://`` for the in-memory log; ``sqlite:///abs/path.db`` or a plain file
            path for SQLite; ``postgresql://...`` (or ``postgres://...``) for PostgreSQL.
        serializer: how payloads become bytes (pickle by default).

    Raises:
        ValueError: the URL has a scheme no backend handles.
    """
    text = str(url)
    log: ActionLog
    if text == "memory://":
        log = InMemoryActionLog(serializer)
    elif text.startswith(("postgresql://", "postgres://")):
        from flink_agents.runtime.action_log.postgres import PostgresActionLog

        log = PostgresActionLog(text, serializer)
    elif text.startswith("sqlite://") or "://" not in text:
        from flink_agents.runtime.action_log.sqlite import SqliteActionLog

        log = SqliteActionLog(text, serializer)
    else:
        raise ValueError(
            f"unsupported action log URL {text!r}: use memory://, sqlite:///path/to/file.db, "
            "a file path, or postgresql://..."
        )
    try:
        log.setup()
    except BaseException:
        log.close()
        raise
    return log
