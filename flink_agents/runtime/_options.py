"""Agent options: from defaults, Flink's ``config.yaml`` (under ``agent:``), then code."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from flink_agents.api._errors import FlinkAgentsError

ErrorPolicy = Literal["fail", "error-output", "retry"]


class AgentOptions(BaseModel):
    """How runners execute agents. Keys are written in Flink's style (``num-async-threads``);
    in Python, pass them with underscores (``num_async_threads=32``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    num_async_threads: int = Field(16, alias="num-async-threads", ge=1, le=4096)
    """Threads running ``durable_execute_async`` calls, per subtask."""
    max_in_flight: int = Field(256, alias="max-in-flight", ge=1)
    """Durable calls a subtask lets run at once before it stops taking input (backpressure)."""
    error_policy: ErrorPolicy = Field("fail", alias="error-policy")
    """``fail`` the job (it restarts from its checkpoint), route the run to the
    ``error-output``, or ``retry`` the action with backoff (then the error output)."""
    retry_max_attempts: int = Field(3, alias="retry-max-attempts", ge=1)
    retry_initial_backoff_ms: int = Field(100, alias="retry-initial-backoff-ms", ge=0)
    retry_max_backoff_ms: int = Field(10_000, alias="retry-max-backoff-ms", ge=0)
    max_steps_per_run: int = Field(10_000, alias="max-steps-per-run", ge=1)
    async_poll_interval_ms: int = Field(5, alias="async-poll-interval-ms", ge=1)
    """First interval at which a parked run checks whether its durable call is done; it
    doubles at every check, up to ``async-poll-max-interval-ms``."""
    async_poll_max_interval_ms: int = Field(50, alias="async-poll-max-interval-ms", ge=1)
    memory_snapshots: bool = Field(False, alias="memory-snapshots")
    """Emit each key's short-term memory after every run to a side output (for demos and
    debugging: it reads the key's whole memory once per run)."""

    action_log: str | None = Field(None, alias="action-log")
    """Where completed actions and durable calls are recorded (design section 5):
    ``sqlite:///abs/path.db``, ``postgresql://user@host/db`` (shared by every TaskManager),
    ``memory://``, or ``none``. Unset: a SQLite file under ``data-dir`` for Flink jobs,
    nothing for the local runner (it has no failures to recover from)."""
    action_log_job: str | None = Field(None, alias="action-log-job")
    """The job's name in the log. Unset: a fresh id per submitted job, which a failover
    restart keeps. Pin it to replay across a resubmission from a savepoint."""
    action_log_retention_ms: int = Field(600_000, alias="action-log-retention-ms", ge=1)
    """How long records are kept; must exceed the time a checkpoint can take to complete
    (see docs/consistency.md)."""
    data_dir: str = Field(
        default_factory=lambda: os.environ.get("FLINK_AGENTS_DATA_DIR", "~/.flink-agents"),
        alias="data-dir",
    )
    """Where embedded stores keep their files (the SQLite action log by default); the
    default is ``$FLINK_AGENTS_DATA_DIR`` or ``~/.flink-agents``."""

    long_term_memory_store: str | None = Field(None, alias="long-term-memory-store")
    """Where ``ctx.long_term_memory`` and ``ctx.knowledge`` live: ``http(s)://...`` for a
    Qdrant server (key in ``$QDRANT_API_KEY``), else a directory for the embedded store.
    Unset: ``<data-dir>/vector-store``. Flink jobs add a subdirectory per subtask there
    (an embedded store is locked by one process), so knowledge shared across subtasks
    needs a server."""
    long_term_memory_embedding: str | None = Field(None, alias="long-term-memory-embedding")
    """The embedding-model resource for long-term memory; unset: the offline MiniLM model."""
    long_term_memory_chat_model: str | None = Field(None, alias="long-term-memory-chat-model")
    """The chat-model resource that summarizes memory sets with the ``summarize`` strategy."""

    def action_log_url(self, embedded_default: bool) -> str | None:
        """The action log to open, or None for none."""
        if self.action_log is None:
            if not embedded_default:
                return None
            path = Path(self.data_dir).expanduser().resolve() / "action-log.db"
            return f"sqlite://{path}"
        return None if self.action_log.strip().lower() == "none" else self.action_log

    def retry_backoff_ms(self, attempt: int) -> int:
        """Exponential backoff before retry number ``attempt`` (1-based)."""
        return min(self.retry_max_backoff_ms, self.retry_initial_backoff_ms * 2 ** (attempt - 1))


def load_options(
    overrides: dict[str, Any] | None = None, conf_dir: str | None = None
) -> AgentOptions:
    """Options from Flink's ``config.yaml`` ``agent:`` section, overridden by ``overrides``.

    ``conf_dir`` defaults to ``$FLINK_CONF_DIR``; no directory or file means defaults.
    """
    values: dict[str, Any] = {}
    conf_dir = conf_dir or os.environ.get("FLINK_CONF_DIR")
    source = "options"
    if conf_dir and (Path(conf_dir) / "config.yaml").is_file():
        source = str(Path(conf_dir) / "config.yaml")
        values.update(_agent_section(Path(source)))
    for name, value in (overrides or {}).items():
        values[name.replace("_", "-")] = value
    try:
        return AgentOptions.model_validate(values)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise FlinkAgentsError(
            f"{source}: agent option {where!r}: {first['msg']} (got {first.get('input')!r})"
        ) from None


def _agent_section(path: Path) -> dict[str, Any]:
    """The ``agent:`` mapping of a Flink config file; flat ``agent.x: v`` keys count too."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    section = dict(data.get("agent") or {}) if isinstance(data, dict) else {}
    for key, value in data.items() if isinstance(data, dict) else []:
        if isinstance(key, str) and key.startswith("agent."):
            section[key.removeprefix("agent.")] = value
    return section
