"""Agent options: from defaults, Flink's ``config.yaml`` (under ``agent:``), then code."""

from __future__ import annotations

import difflib
import os
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from flink_agents.api import Budget, FlinkAgentsError, ModelPrice

ErrorPolicy = Literal["fail", "error-output", "retry"]
ActionLogRecord = Literal["restore", "all"]


class AgentOptions(BaseModel):
    """How runners execute agents. Keys are written in Flink's style (``num-async-threads``);
    in Python, pass them with underscores (``num_async_threads=32``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    num_async_threads: int = Field(16, alias="num-async-threads", ge=1, le=4096)
    """Threads running ``durable_execute_async`` calls of plain functions, per subtask (an
    ``async def`` function's calls, the built-in chat and async tool calls among them, run on
    the engine's event loop and take none). On Flink in thread mode, a subtask whose agent
    has ``async def`` actions or resources starts them all when it opens (about 1 to 2 ms
    each), not at its first calls."""
    max_in_flight: int = Field(None, alias="max-in-flight", ge=1, validate_default=False)
    """Runs a subtask lets wait on durable calls, with the inputs queued behind them, before
    it stops taking input (backpressure). Unset: twice ``num-async-threads``, enough to keep
    every thread busy; more only queues calls in front of the threads and inputs behind
    parked runs, which a bounded input's end then finishes one key at a time."""
    stop_wait_ms: int = Field(60_000, alias="stop-wait-ms", ge=0)
    """How long a Flink subtask that stops before its input ends (a stop with a savepoint,
    a cancel, a failover) waits for the durable calls it has in flight, so that their
    outcomes are in the action log a restore reads; a call still running then is made
    again by the restore (docs/consistency.md, "Stopping a job"). Keep it well under
    Flink's ``task.cancellation.timeout`` (180 s), past which a cancelled task's
    TaskManager is stopped."""
    long_term_memory_max_storing: int = Field(512, alias="long-term-memory-max-storing", ge=1)
    """Runs a subtask lets wait for their long-term memory and knowledge items to be
    embedded and stored (an action completes only once they are) before it stops taking
    input; not counted in ``max-in-flight``. Items are embedded in shared batches of up to
    128: the more runs wait, the larger the batches and the better a remote embedding
    endpoint's latency is shared."""
    error_policy: ErrorPolicy = Field("fail", alias="error-policy")
    """``fail`` the job (it restarts from its checkpoint), route the run to the
    ``error-output``, or ``retry`` the action with backoff (then the error output)."""
    retry_max_attempts: int = Field(3, alias="retry-max-attempts", ge=1)
    retry_initial_backoff_ms: int = Field(100, alias="retry-initial-backoff-ms", ge=0)
    retry_max_backoff_ms: int = Field(10_000, alias="retry-max-backoff-ms", ge=0)
    max_steps_per_run: int = Field(10_000, alias="max-steps-per-run", ge=1)
    parallel_actions: bool = Field(True, alias="parallel-actions")
    """Run the ``async def`` actions that listen to one event side by side, so their
    durable calls overlap (a fan-out of LLM calls takes as long as the slowest). Each sees
    the memory as it was when the event's first listener started, plus its own writes;
    their writes and events commit in plan order once all are done (docs/consistency.md,
    "Fan-out"). ``false``: one action at a time, each seeing the writes of those before."""
    async_poll_interval_ms: int = Field(5, alias="async-poll-interval-ms", ge=1)
    """First interval at which a parked run checks whether its durable call is done; it
    doubles at every check, up to ``async-poll-max-interval-ms``. Once the action's calls
    have a duration estimate, the checks are: after this interval (only until the action
    has shown a steady latency), when the call is expected to end, then the doubling
    backoff from this interval again. Checks fall on multiples of this interval, so that
    on Flink the checks of many keys fire together (one timer mail for all of them)."""
    async_poll_max_interval_ms: int = Field(50, alias="async-poll-max-interval-ms", ge=1)
    state_cache_keys: int = Field(4096, alias="state-cache-keys", ge=0)
    """Keys per subtask whose control value and memory the run driver keeps in memory
    between callbacks, least recently used out; once full, a key enters only when seen
    again soon (so that many keys each seen rarely do not push out those that come back):
    their state is still written at the end of every callback, only reading it back is
    saved (in thread mode a state read is a call into the JVM). 0 turns the cache off."""
    event_log_level: Literal["off", "standard", "verbose"] = Field("off", alias="event-log-level")
    """The event log (``docs/observability.md``): one JSON line per run, event and action,
    with payloads cut to ``event-log-max-payload-chars`` at ``standard``, in full at
    ``verbose``; secrets never appear. Off for jobs unless set; the demo sets
    ``standard``."""
    event_log_output: Literal["files", "stream"] = Field("files", alias="event-log-output")
    """``files``: rolled files under ``event-log-dir``; ``stream``: on Flink, a side output
    (``builder.event_log_stream()``, JSON lines) to sink anywhere."""
    event_log_dir: str | None = Field(None, alias="event-log-dir")
    """Where the event log's rolled files go (a subdirectory per Flink subtask). Unset:
    ``<data-dir>/event-log``."""
    event_log_max_payload_chars: int = Field(2000, alias="event-log-max-payload-chars", ge=16)
    event_log_max_file_bytes: int = Field(
        16 * 1024 * 1024, alias="event-log-max-file-bytes", ge=1024
    )
    event_log_max_files: int = Field(5, alias="event-log-max-files", ge=1)
    """Rolled files kept besides the current one (so the log is bounded)."""
    memory_snapshots: bool = Field(False, alias="memory-snapshots")
    tracing: Literal["off", "otlp"] = Field("off", alias="tracing")
    """Traces of runs (``docs/tracing.md``): ``otlp`` exports a span per run, action,
    durable call and sub-agent run, with the OpenTelemetry GenAI conventions, to an OTLP
    collector (needs the ``otel`` extra: ``pip install 'pyflink-agents[otel]'``)."""
    tracing_endpoint: str | None = Field(None, alias="tracing-endpoint")
    """The collector's OTLP endpoint (``http://host:4318`` for ``http/protobuf``,
    ``http://host:4317`` for ``grpc``). Unset: the standard ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
    or ``OTEL_EXPORTER_OTLP_ENDPOINT``, else the SDK's default (localhost). Headers (a
    collector's credentials) come only from ``OTEL_EXPORTER_OTLP_HEADERS``."""
    tracing_protocol: Literal["grpc", "http/protobuf"] | None = Field(
        None, alias="tracing-protocol"
    )
    """Unset: ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` or ``OTEL_EXPORTER_OTLP_PROTOCOL``, else
    ``http/protobuf``."""
    tracing_content: bool = Field(False, alias="tracing-content")
    """Record prompts, completions, tool arguments and results, inputs and outputs in the
    spans, redacted and cut to ``event-log-max-payload-chars`` as the event log's payloads
    are. Off: spans carry names, sizes, token counts and outcomes only."""
    tracing_max_queue: int = Field(2048, alias="tracing-max-queue", ge=1)
    """Spans a subtask queues for export at most: past it, while the collector is slow or
    down, spans are dropped (and counted: ``tracing.numOfSpansDropped``), never waited
    for."""
    """Emit each key's short-term memory after every run to a side output (for demos and
    debugging: it reads the key's whole memory once per run)."""
    short_term_memory_ttl: timedelta | None = Field(None, alias="short-term-memory-ttl")
    """A key's short-term memory expires, whole, once the key has been idle this long (no
    run in progress, queued, waiting or scheduled; ``docs/waiting.md``): a duration, in
    code a ``timedelta``, in a config file seconds or ISO 8601 (``P30D``, ``PT12H``).
    Unset: it never expires."""

    budgets: tuple[Budget, ...] = Field((), alias="budgets")
    """Limits on what chat model calls spend per key or per agent in windows of time
    (``docs/spend.md``), each a ``Budget`` (in a config file, a mapping of its fields);
    added to those of the agent's plan (``config.budgets``), replacing any of the same
    name."""
    model_prices: dict[str, ModelPrice] = Field(default_factory=dict, alias="model-prices")
    """Prices per million tokens by chat model resource name (``{"input": 2.5,
    "cached_input": 1.25, "output": 10}``), over a resource's own ``prices``."""

    shared_rate_limits: bool = Field(False, alias="shared-rate-limits")
    """Chat models' ``requests_per_minute`` and ``tokens_per_minute`` hold for the whole
    job: every subtask takes its requests' places from the action log's store (one limit on
    PostgreSQL; per machine on the default SQLite file), instead of each subtask keeping
    the limit on its own."""

    action_log: str | None = Field(None, alias="action-log")
    """Where completed actions and durable calls are recorded (design section 5):
    ``sqlite:///abs/path.db``, ``postgresql://user@host/db`` (shared by every TaskManager),
    ``memory://``, or ``none``. Unset: a SQLite file under ``data-dir`` for Flink jobs,
    ``memory://`` for the local runner (so a retried action reuses its durable calls there
    as on Flink)."""
    action_log_job: str | None = Field(None, alias="action-log-job")
    """The job's name in the log. Unset: a fresh id per submitted job, which a failover
    restart keeps. Pin it to replay across a resubmission from a savepoint."""
    action_log_record: ActionLogRecord = Field("restore", alias="action-log-record")
    """Which completed actions the log records. ``restore``: those a restore needs, the
    actions that made a durable call or wrote outside Flink state (docs/consistency.md,
    "What is recorded"). ``all``: every completed action, with its memory changes and the
    events it sent, so that ``flink-agents history`` shows everything an agent did to a
    key (an audit); it costs the jobs whose actions mostly call nothing a record per
    action (``bench/RESULTS.md``). No effect with ``action-log: none``."""
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
    Unset: ``<data-dir>/vector-store``. One embedded directory serves every runner and
    Flink subtask of a machine (the first process to open it serves the others); a job on
    several machines needs a server."""
    long_term_memory_embedding: str | None = Field(None, alias="long-term-memory-embedding")
    """The embedding-model resource for long-term memory; unset: the offline MiniLM model."""
    long_term_memory_chat_model: str | None = Field(None, alias="long-term-memory-chat-model")
    """The chat-model resource that summarizes memory sets with the ``summarize`` strategy."""

    @field_validator(
        "num_async_threads",
        "max_in_flight",
        "long_term_memory_max_storing",
        "retry_max_attempts",
        "retry_initial_backoff_ms",
        "retry_max_backoff_ms",
        "max_steps_per_run",
        "async_poll_interval_ms",
        "async_poll_max_interval_ms",
        "action_log_retention_ms",
        "state_cache_keys",
        "event_log_max_payload_chars",
        "event_log_max_file_bytes",
        "event_log_max_files",
        "tracing_max_queue",
        mode="before",
    )
    @classmethod
    def _no_booleans_for_numbers(cls, value: Any) -> Any:
        # pydantic would read ``true`` as 1: in a config file that is a mistake, not a count
        if isinstance(value, bool):
            raise PydanticCustomError("bool_for_int", "must be an integer, not a boolean")
        return value

    @field_validator("action_log")
    @classmethod
    def _known_action_log(cls, value: str | None) -> str | None:
        # the rule of ``open_action_log``, checked before a job is submitted
        if value is None or value.strip().lower() == "none" or value == "memory://":
            return value
        if value.startswith(("sqlite://", "postgresql://", "postgres://")) or "://" not in value:
            return value
        raise PydanticCustomError(
            "action_log_url",
            "unsupported action log URL: use none, memory://, sqlite:///path/to/file.db, a file "
            "path, or postgresql://...",
        )

    @model_validator(mode="after")
    def _bounds_in_order(self) -> AgentOptions:
        if self.max_in_flight is None:  # frozen: set once, while validating
            object.__setattr__(self, "max_in_flight", 2 * self.num_async_threads)
        for low, high in _ORDERED:
            if getattr(self, low) > getattr(self, high):
                raise PydanticCustomError(
                    "options_out_of_order",
                    "{low} must not exceed {high}",
                    {"low": _alias(low), "high": _alias(high)},
                )
        return self

    def action_log_url(self, embedded_default: bool) -> str | None:
        """The action log to open, or None for none."""
        if self.action_log is None:
            if not embedded_default:
                return None
            path = Path(self.data_dir).expanduser().resolve() / "action-log.db"
            return f"sqlite://{path}"
        return None if self.action_log.strip().lower() == "none" else self.action_log

    @field_validator("budgets")
    @classmethod
    def _unique_budgets(cls, value: tuple[Budget, ...]) -> tuple[Budget, ...]:
        names = [budget.name for budget in value]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"two budgets are named {twice[0]!r}")
        return value

    @field_validator("short_term_memory_ttl")
    @classmethod
    def _positive_ttl(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value <= timedelta(0):
            raise ValueError("must be a positive duration")
        return value

    def short_term_memory_ttl_ms(self) -> int | None:
        """``short-term-memory-ttl`` in whole milliseconds (at least 1), None when unset."""
        ttl = self.short_term_memory_ttl
        return None if ttl is None else max(1, ttl // timedelta(milliseconds=1))

    def event_log_directory(self) -> Path:
        """Where the event log's files go."""
        return Path(self.event_log_dir or Path(self.data_dir) / "event-log").expanduser()

    def retry_backoff_ms(self, attempt: int) -> int:
        """Exponential backoff before retry number ``attempt`` (1-based)."""
        return min(self.retry_max_backoff_ms, self.retry_initial_backoff_ms * 2 ** (attempt - 1))


def load_options(
    overrides: dict[str, Any] | None = None, conf_dir: str | None = None
) -> AgentOptions:
    """Options from Flink's ``config.yaml`` ``agent:`` section, overridden by ``overrides``
    (the options passed in code, spelled ``num_async_threads`` or ``num-async-threads``).

    ``conf_dir`` defaults to ``$FLINK_CONF_DIR``; no directory or file means defaults.

    Raises:
        FlinkAgentsError: an unreadable config file, an unknown option (with the closest valid
            name) or an invalid value; the message names the option, the value and where it
            was set (the config file's path and line, or code).
    """
    conf_dir = conf_dir or os.environ.get("FLINK_CONF_DIR")
    config = Path(conf_dir) / "config.yaml" if conf_dir else None
    given: dict[Any, _Given] = {}  # by canonical (hyphenated) name
    if config is not None and config.is_file():
        for item in _agent_section(config):
            given[item.canonical] = item
    for name, value in (overrides or {}).items():
        item = _Given(name, value)
        given[item.canonical] = item
    for canonical, item in list(given.items()):
        if canonical in _NAMES or not isinstance(canonical, str):
            continue
        try:
            ours = their_option(canonical, item.value)
        except ValueError as error:
            raise FlinkAgentsError(f"{item.place()}: {error}") from None
        if ours is None:
            continue
        del given[canonical]
        for name, value in ours.items():  # an option of ours set as such wins
            given.setdefault(name, _Given(name, value, item.file, item.line))
    for item in given.values():
        if item.canonical not in _NAMES:
            raise FlinkAgentsError(_unknown(item))
    try:
        return AgentOptions.model_validate({n: item.value for n, item in given.items()})
    except ValidationError as error:
        raise FlinkAgentsError(_invalid(error.errors()[0], given)) from None


_THEIR_STRATEGIES = {"fail": "fail", "retry": "retry", "ignore": "error-output"}
_THEIR_ASYNC = ("chat.async", "tool-call.async", "rag.async", "chat", "tool-call", "rag")
"""Their switches for making model, tool and retrieval calls off the operator thread (flat,
or as the ``chat: {async: ...}`` mappings of a YAML file): ours always are."""


def their_option(name: str, value: Any) -> dict[str, Any] | None:
    """What an option of Apache Flink Agents (``docs/migrating.md``) sets here, by our option
    names: ``{}`` for one that has no counterpart to set, None for a name that is not
    theirs.

    Raises:
        ValueError: a value of theirs that does not translate.
    """
    if name == "error-handling-strategy":
        strategy = str(getattr(value, "value", value)).lower()
        if strategy not in _THEIR_STRATEGIES:
            raise ValueError(f"error-handling-strategy must be one of {sorted(_THEIR_STRATEGIES)}")
        return {"error-policy": _THEIR_STRATEGIES[strategy]}
    if name == "max-retries":
        return {"retry-max-attempts": int(value) + 1}
    if name == "job-identifier":
        return {"action-log-job": value}
    if name == "baseLogDir":  # their event log is on by default: a directory means it
        return {"event-log-dir": value, "event-log-level": "standard"}
    if name in _THEIR_ASYNC:
        return {}
    return None


# Pairs of options where the first must not exceed the second.
_ORDERED = (
    ("retry_initial_backoff_ms", "retry_max_backoff_ms"),
    ("async_poll_interval_ms", "async_poll_max_interval_ms"),
)
_NAMES = sorted(field.alias for field in AgentOptions.model_fields.values() if field.alias)


def _alias(attribute: str) -> str:
    return AgentOptions.model_fields[attribute].alias or attribute


class _Given:
    """An option as the user wrote it: name, value, and the config file and line it is on
    (no file: passed in code)."""

    __slots__ = ("file", "line", "name", "value")

    def __init__(
        self, name: Any, value: Any, file: Path | None = None, line: int | None = None
    ) -> None:
        self.name, self.value, self.file, self.line = name, value, file, line

    @property
    def canonical(self) -> Any:
        """The option's name with hyphens and without a flat key's ``agent.`` prefix."""
        if not isinstance(self.name, str):
            return self.name
        return self.name.removeprefix("agent.").replace("_", "-")

    def place(self) -> str:
        if self.file is None:
            return f"agent option {self.name!r} passed in code"
        line = f", line {self.line}" if self.line is not None else ""
        return f"{self.file}{line}: agent option {self.name!r}"


def _unknown(item: _Given) -> str:
    """Unknown option, with the closest valid name spelled the way the user spells them."""
    message = f"{item.place()}: unknown option"
    if not isinstance(item.name, str):
        return f"{message}: option names are strings"
    close = difflib.get_close_matches(item.canonical, _NAMES, n=1, cutoff=0.6)
    if close:
        suggestion = close[0].replace("-", "_") if "_" in item.name else close[0]
        return f"{message}; did you mean {suggestion!r}?"
    return f"{message}; the options are {', '.join(_NAMES)}"


def _invalid(problem: Any, given: dict[Any, _Given]) -> str:
    """The first validation problem: the option, its value and where it was set."""
    context = problem.get("ctx") or {}
    if problem["type"] == "options_out_of_order":
        low, high = context["low"], context["high"]
        shown = []
        for name in (low, high):
            item = given.get(name)
            if item is None:
                default = AgentOptions.model_fields[name.replace("-", "_")].default
                shown.append(f"agent option {name!r} = {default!r} (the default)")
            else:
                shown.append(f"{item.place()} = {item.value!r}")
        return f"{shown[0]} is larger than {shown[1]}; {low!r} must not exceed {high!r}"
    name = str(problem["loc"][0]) if problem["loc"] else ""
    item = given.get(name) or _Given(name, problem.get("input"))
    reason = f"{_reason(problem, context)} (got {item.value!r})"
    if problem["type"] == "literal_error" and isinstance(item.value, str):
        choices = get_args(AgentOptions.model_fields[name.replace("-", "_")].annotation)
        close = difflib.get_close_matches(item.value, [str(c) for c in choices], n=1, cutoff=0.6)
        if close:
            reason += f"; did you mean {close[0]!r}?"
    return f"{item.place()}: {reason}"


def _reason(problem: Any, context: dict[str, Any]) -> str:
    kind = problem["type"]
    if kind == "greater_than_equal":
        return f"must be at least {context['ge']}"
    if kind == "less_than_equal":
        return f"must be at most {context['le']}"
    if kind == "literal_error":
        return f"must be {context['expected']}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return "must be an integer"
    if kind in ("bool_parsing", "bool_type"):
        return "must be true or false"
    if kind == "string_type":
        return "must be a string"
    return str(problem["msg"]).removeprefix("Value error, ")


def _agent_section(path: Path) -> list[_Given]:
    """The options of a Flink config file: its ``agent:`` mapping, and flat ``agent.x: v``
    keys (which win), each with its line.

    Raises:
        FlinkAgentsError: the file cannot be read or parsed, or ``agent`` is not a mapping.
    """
    import yaml  # here: a Flink operator takes its options from the plan, never from a file

    try:
        loader = yaml.SafeLoader(path.read_text(encoding="utf-8"))
        try:
            root = loader.get_single_node()
            data = loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
    except OSError as error:
        raise FlinkAgentsError(
            f"{path}: cannot read the Flink configuration: {error.strerror}"
        ) from None
    except UnicodeDecodeError as error:
        raise FlinkAgentsError(
            f"{path}: cannot read the Flink configuration: not UTF-8 (byte {error.start})"
        ) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise FlinkAgentsError(f"{path}: invalid YAML{where}: {problem}") from None
    if not isinstance(data, dict) or not isinstance(root, yaml.MappingNode):
        return []
    lines: dict[tuple[str | None, str], int] = {}  # ("agent" or None, key) -> line
    for key_node, value_node in root.value:
        if not isinstance(key_node, yaml.ScalarNode):
            continue
        if key_node.value == "agent" and isinstance(value_node, yaml.MappingNode):
            for child, _ in value_node.value:
                if isinstance(child, yaml.ScalarNode):
                    lines.setdefault(("agent", child.value), child.start_mark.line + 1)
        lines[(None, key_node.value)] = key_node.start_mark.line + 1
    nested = data.get("agent")
    if nested is not None and not isinstance(nested, dict):
        line = lines.get((None, "agent"))
        raise FlinkAgentsError(
            f"{path}, line {line}: 'agent' must be a mapping of agent options, got "
            f"{type(nested).__name__} {nested!r:.80}"
        )
    found = [
        _Given(name, value, path, lines.get(("agent", str(name))))
        for name, value in (nested or {}).items()
    ]
    found += [
        _Given(key, value, path, lines.get((None, key)))
        for key, value in data.items()
        if isinstance(key, str) and key.startswith("agent.")
    ]
    return found
