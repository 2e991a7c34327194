"""Apache Flink Agents' option names (``flink_agents.api.core_options``), and what they set
here (``docs/migrating.md``)."""

from __future__ import annotations

import os
from enum import Enum

from flink_agents.api.configuration import ConfigOption


class ErrorHandlingStrategy(Enum):
    """What a failing action does: ``fail`` the job, ``retry`` it, or ``ignore`` the run
    (here: its record goes to the error output, which a job may leave unread)."""

    RETRY = "retry"
    FAIL = "fail"
    IGNORE = "ignore"


class AgentConfigOptions:
    """Job-wide options."""

    JOB_IDENTIFIER = ConfigOption(key="job-identifier", config_type=str, default=None)
    """Names the job in the action log (our ``action-log-job``)."""


class AgentExecutionOptions:
    """How actions run."""

    ERROR_HANDLING_STRATEGY = ConfigOption(
        key="error-handling-strategy",
        config_type=ErrorHandlingStrategy,
        default=ErrorHandlingStrategy.FAIL,
    )
    MAX_RETRIES = ConfigOption(key="max-retries", config_type=int, default=3)
    NUM_ASYNC_THREADS = ConfigOption(
        key="num-async-threads", config_type=int, default=(os.cpu_count() or 1) * 2
    )
    CHAT_ASYNC = ConfigOption(key="chat.async", config_type=bool, default=True)
    TOOL_CALL_ASYNC = ConfigOption(key="tool-call.async", config_type=bool, default=True)
    RAG_ASYNC = ConfigOption(key="rag.async", config_type=bool, default=True)


__all__ = [
    "AgentConfigOptions",
    "AgentExecutionOptions",
    "ErrorHandlingStrategy",
]
