"""The action log (write-ahead log of completed actions and their durable calls).

The interface and the in-memory backend are importable here; the durable backends live in
``sqlite`` and ``postgres``, whose drivers are imported only when those modules are, so a
job that logs to SQLite does not need psycopg. ``open_action_log`` picks one from a URL.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from flink_agents._ids import digest_args
from flink_agents._lazy import lazy_attributes
from flink_agents._public import name_by_package
from flink_agents.runtime.action_log._base import (
    ActionIdentity,
    ActionLog,
    ActionLogError,
    ActionRecord,
    DurableCall,
    EncodedCall,
    EncodedRecord,
    InterruptedAction,
    JobMarker,
    JobSummary,
    PickleSerializer,
    RecordedError,
    Serializer,
    Spent,
    UnstorableValueError,
    external_id,
    redact_secrets,
)
from flink_agents.runtime.action_log._heartbeat import JobHeartbeat
from flink_agents.runtime.action_log._memory import InMemoryActionLog

# A key's history (the CLI's ``history``) on first use: an operator never reads it.
__getattr__ = lazy_attributes(
    globals(),
    dict.fromkeys(
        ("ActionEntry", "KeyHistory", "MemoryChange", "RunHistory", "key_history"),
        "flink_agents.runtime.action_log._history",
    ),
)

__all__ = [
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

name_by_package(__name__, globals(), __all__)


def open_action_log(url: str | Path, serializer: Serializer | None = None) -> ActionLog:
    """The backend ``url`` names, set up and ready.

    Args:
        url: ``memory://`` for the in-memory log; ``sqlite:///abs/path.db`` or a plain file
            path for SQLite; ``postgresql://...`` (or ``postgres://...``) for PostgreSQL.
        serializer: how payloads become bytes (pickle by default).

    Raises:
        ValueError: the URL has a scheme no backend handles.
        ActionLogError: the storage cannot be opened or set up (an unreachable database, a
            directory that cannot be written), naming the log with its password redacted,
            like every other failure of the log: it is not the fault of an action.
    """
    text = str(url)
    backend = _backend(text)
    try:
        log = backend(text, serializer)
    except Exception as error:  # e.g. SQLite's directory cannot be created
        raise _open_error(redact_secrets(text), redact_secrets, error) from error
    try:
        log.setup()
    except Exception as error:  # e.g. PostgreSQL refuses the connection
        log.close()
        raise _open_error(log.name, log.redact, error) from error
    except BaseException:
        log.close()
        raise
    return log


def _backend(url: str) -> Callable[[str, Serializer | None], ActionLog]:
    """The constructor of the log ``url`` names (a backend's driver is imported only here)."""
    if url == "memory://":
        return lambda _url, serializer: InMemoryActionLog(serializer)
    if url.startswith(("postgresql://", "postgres://")):
        from flink_agents.runtime.action_log.postgres import PostgresActionLog

        return PostgresActionLog
    if url.startswith("sqlite://") or "://" not in url:
        from flink_agents.runtime.action_log.sqlite import SqliteActionLog

        return SqliteActionLog
    raise ValueError(
        f"unsupported action log URL {url!r}: use memory://, sqlite:///path/to/file.db, "
        "a file path, or postgresql://..."
    )


def _open_error(name: str, redact: Callable[[str], str], error: BaseException) -> ActionLogError:
    """The ``ActionLogError`` of a log that could not be opened (the journal's form)."""
    return ActionLogError(
        f"action log {name}: opening failed: {redact(f'{type(error).__name__}: {error}')}"
    )
