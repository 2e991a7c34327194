"""The one spelling of a failure of the action log, shared by the journal and its threads."""

from __future__ import annotations

from flink_agents.runtime.action_log import ActionLog, ActionLogError


def log_error(log: ActionLog, what: str, error: BaseException) -> ActionLogError:
    """The ``ActionLogError`` for ``error``, naming ``log`` and ``what`` was being done."""
    cause = log.redact(f"{type(error).__name__}: {error}")
    return ActionLogError(f"action log {log.name}: {what} failed: {cause}")
