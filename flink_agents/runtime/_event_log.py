"""The event log: one JSON line for every event and every action of every run.

Each line carries the identity of what it describes (job, key, run sequence, step), when it
happened and how it ended, so a reader can follow a key's runs without the action log.
Records are dicts (see ``docs/observability.md`` for the schema), written by an
``EventLog`` to a sink: rolled, bounded files under a directory (``FileSink``, on the
standard library's ``RotatingFileHandler``), or a callable (``CallbackSink``: the Flink
runner hands the lines to a side output the user can sink anywhere).

Levels:

- ``off``: nothing is built or written (the run lifecycle's calls return at once);
- ``standard``: every record, with payloads (event contents, action inputs, errors)
  truncated to ``max_payload_chars``;
- ``verbose``: payloads in full.

Secrets never appear: before a record is written, the value of every field whose name
looks secret (``api_key``, ``password``, ``authorization``, ...) becomes ``"***"``, and
every string that contains the value of an environment variable whose name looks secret
(``...KEY``, ``...TOKEN``, ``...SECRET``, ``...PASSWORD``) has that value replaced.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flink_agents.runtime._options import AgentOptions

REDACTED = "***"
SCHEMA_VERSION = 1
DEFAULT_MAX_PAYLOAD_CHARS = 2000
DEFAULT_MAX_FILE_BYTES = 16 * 1024 * 1024
DEFAULT_BACKUP_COUNT = 5
MIN_SECRET_CHARS = 6
"""Environment values shorter than this are not searched for: "1" or "true" would redact
every digit and flag in the log."""

SECRET_FIELD = re.compile(
    r"(api[_-]?key|apikey|secret|password|passwd|token|authorization|credential|private[_-]?key)",
    re.IGNORECASE,
)
SECRET_ENV_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.IGNORECASE)


class EventLogLevel(StrEnum):
    OFF = "off"
    STANDARD = "standard"
    VERBOSE = "verbose"


# -- redaction -----------------------------------------------------------------------------


class Redactor:
    """Replaces secrets in a JSON-like value (dicts, lists, strings)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, values))) if values else None

    @classmethod
    def from_environment(
        cls, environ: Mapping[str, str] | None = None, extra: Iterable[str] = ()
    ) -> Redactor:
        """Secrets: the values of the environment's secret-looking variables, and ``extra``."""
        environ = os.environ if environ is None else environ
        found = [value for name, value in environ.items() if SECRET_ENV_NAME.search(name)]
        return cls([*found, *extra])

    def redact(self, value: Any) -> Any:
        if isinstance(value, str):
            return value if self._pattern is None else self._pattern.sub(REDACTED, value)
        if isinstance(value, Mapping):
            return {
                str(k): REDACTED if _secret_field(k, v) else self.redact(v)
                for k, v in value.items()
            }
        if isinstance(value, (list, tuple)):
            return [self.redact(item) for item in value]
        return value


def _secret_field(name: Any, value: Any) -> bool:
    """A field named like a secret that holds a value (an empty one hides nothing)."""
    return (
        isinstance(name, str)
        and SECRET_FIELD.search(name) is not None
        and value not in (None, "")
        and not isinstance(value, (bool, int, float, Mapping, list))
    )


# -- payloads ------------------------------------------------------------------------------


_SUMMARY = {"bytes": "size"}
"""The serialization context under which a message's parts write their bytes as
``"<N bytes>"`` (``ImagePart``, ``DocumentPart``): a log holds no image."""


def to_jsonable(value: Any, depth: int = 0) -> Any:
    """A JSON-friendly form of an event, a record or any value (pydantic models by their
    fields, bytes by their length, in a model too, unknown objects by ``repr``)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if depth > 20:
        return repr(value)
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v, depth + 1) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return to_jsonable(dump(mode="json", context=_SUMMARY), depth + 1)
        except Exception:  # a model whose fields do not serialize: fall back to repr
            return repr(value)
    return repr(value)


def truncate(text: str, limit: int) -> str:
    if limit <= 0 or len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more chars)"


# -- sinks ---------------------------------------------------------------------------------


class FileSink:
    """Lines appended to ``<directory>/<file_name>``, rolled at ``max_bytes`` and keeping
    ``backup_count`` older files (``.1`` the newest), so the log stays bounded."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        file_name: str = "events.jsonl",
        max_bytes: int = DEFAULT_MAX_FILE_BYTES,
        backup_count: int = DEFAULT_BACKUP_COUNT,
    ) -> None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        self.path = Path(directory) / file_name
        self._handler = logging.handlers.RotatingFileHandler(
            self.path, maxBytes=max_bytes, backupCount=backup_count, encoding="utf-8", delay=True
        )
        self._handler.setFormatter(logging.Formatter("%(message)s"))

    def __call__(self, line: str) -> None:
        self._handler.emit(logging.makeLogRecord({"msg": line, "levelno": logging.INFO}))

    def purge_key(self, key: Any) -> int:
        """Remove the lines of ``key`` from this sink's files (``purge_key_lines``), the
        file being written closed meanwhile (the next line opens it again); how many."""
        handler = self._handler
        handler.acquire()
        try:
            if handler.stream is not None:
                handler.stream.close()
                handler.stream = None
            return sum(purge_key_lines(file, key) for file in log_files(self.path.parent))
        finally:
            handler.release()

    def close(self) -> None:
        self._handler.close()


def log_files(directory: Path) -> list[Path]:
    """The event-log files under ``directory`` (rolled ones too), at any depth."""
    return sorted(
        file
        for file in directory.rglob("*.jsonl*")
        if file.is_file() and ".purging" not in file.name
    )


def purge_key_lines(file: Path, key: Any) -> int:
    """Rewrite ``file`` without the lines whose ``key`` is ``key`` (as ``to_jsonable``
    writes it; lines that are not JSON objects stay); how many went. The file is replaced
    whole (written beside it, then renamed), so a reader sees it before or after."""
    wanted = to_jsonable(key)
    kept: list[str] = []
    removed = 0
    with open(file, encoding="utf-8") as lines:
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if isinstance(record, dict) and "key" in record and record["key"] == wanted:
                removed += 1
            else:
                kept.append(line)
    if removed:
        partial = file.with_name(f"{file.name}.purging")
        with open(partial, "w", encoding="utf-8") as out:
            out.writelines(kept)
        os.replace(partial, file)
    return removed


class CallbackSink:
    """Hands each line to ``callback`` (the Flink runner: to a side output)."""

    def __init__(self, callback: Callable[[str], None]) -> None:
        self._callback = callback

    def __call__(self, line: str) -> None:
        self._callback(line)

    def close(self) -> None:
        return None


# -- the log -------------------------------------------------------------------------------


class EventLog:
    """Writes event-log records of one agent operator to ``sink``.

    The run lifecycle calls ``event``, ``action_started``, ``action_finished`` and
    ``run_started`` / ``run_finished``; at level ``off`` each returns at once
    (``enabled`` is False, so a caller can also skip building arguments). Thread-safe.
    """

    def __init__(
        self,
        sink: Callable[[str], None] | None,
        level: EventLogLevel | str = EventLogLevel.STANDARD,
        *,
        job: str = "",
        max_payload_chars: int = DEFAULT_MAX_PAYLOAD_CHARS,
        redactor: Redactor | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.level = EventLogLevel(level)
        self.enabled = self.level is not EventLogLevel.OFF and sink is not None
        self._sink = sink
        self._job = job
        self._limit = max_payload_chars if self.level is EventLogLevel.STANDARD else 0
        self._redactor = redactor if redactor is not None else Redactor.from_environment()
        self._clock = clock
        self._lock = threading.Lock()

    @classmethod
    def to_directory(
        cls,
        directory: str | os.PathLike[str],
        level: EventLogLevel | str = EventLogLevel.STANDARD,
        *,
        file_name: str = "events.jsonl",
        max_bytes: int = DEFAULT_MAX_FILE_BYTES,
        backup_count: int = DEFAULT_BACKUP_COUNT,
        **kwargs: Any,
    ) -> EventLog:
        """A log written to rolled files under ``directory`` (nothing opened at ``off``)."""
        sink = None
        if EventLogLevel(level) is not EventLogLevel.OFF:
            sink = FileSink(directory, file_name, max_bytes, backup_count)
        return cls(sink, level, **kwargs)

    # -- records ---------------------------------------------------------------------------

    def run_started(self, key: Any, run_sequence: int, record: Any) -> None:
        if self.enabled:
            self._write("run_started", key, run_sequence, None, payload={"input": record})

    def run_finished(
        self,
        key: Any,
        run_sequence: int,
        outcome: str,
        duration_ms: float | None = None,
        error: BaseException | str | None = None,
    ) -> None:
        """``outcome``: ``succeeded``, ``failed``, ``error_output`` or ``retry``."""
        if self.enabled:
            self._write(
                "run_finished",
                key,
                run_sequence,
                None,
                outcome=outcome,
                duration_ms=duration_ms,
                error=error,
            )

    def event(
        self, key: Any, run_sequence: int, step: int | None, event: Any, source: str | None = None
    ) -> None:
        """An event was sent (``source``: the action that sent it; None for the input)."""
        if self.enabled:
            self._write(
                "event",
                key,
                run_sequence,
                step,
                event_type=type(event).__name__,
                source=source,
                payload={"event": event},
            )

    def action_started(self, key: Any, run_sequence: int, step: int, action: str) -> None:
        if self.enabled:
            self._write("action_started", key, run_sequence, step, action=action)

    def action_finished(
        self,
        key: Any,
        run_sequence: int,
        step: int,
        action: str,
        outcome: str,
        duration_ms: float | None = None,
        error: BaseException | str | None = None,
        durable_calls: int | None = None,
        until_ms: int | None = None,
        signal: str | None = None,
    ) -> None:
        """``outcome``: ``succeeded``, ``failed``, ``replayed``, ``parked``, ``sleeping``
        (``until_ms``: when the sleep ends) or ``waiting`` (for a ``signal``, its type's
        name, until ``until_ms``, None: no limit)."""
        if self.enabled:
            self._write(
                "action_finished",
                key,
                run_sequence,
                step,
                action=action,
                outcome=outcome,
                duration_ms=duration_ms,
                error=error,
                durable_calls=durable_calls,
                until_ms=until_ms,
                signal=signal,
            )

    def memory_expired(self, key: Any, run_sequence: int, idle_since_ms: int) -> None:
        """A key's short-term memory expired (``short-term-memory-ttl``): the key was idle
        from ``idle_since_ms`` on, at the latest."""
        if self.enabled:
            self._write("memory_expired", key, run_sequence, None, idle_since_ms=idle_since_ms)

    def key_forgotten(self, key: Any, request_id: str | None, removed: dict[str, int]) -> None:
        """A key was erased (``ForgetKey``): its lines leave this log's files (a sink that
        can: ``FileSink``), then one ``key_forgotten`` record confirms it, naming neither
        the key nor anything of its data: the request's ``request_id`` and what went, by
        kind (``removed``; ``event_log_lines`` added here)."""
        if not self.enabled:
            return
        purge = getattr(self._sink, "purge_key", None)
        if purge is not None:
            with self._lock:
                removed = {**removed, "event_log_lines": purge(key)}
        record = {
            "v": SCHEMA_VERSION,
            "ts": round(self._clock() * 1000),
            "kind": "key_forgotten",
            "job": self._job,
            "request_id": request_id,
            "removed": removed,
        }
        line = json.dumps(record, ensure_ascii=False)
        with self._lock:
            self._sink(line)  # type: ignore[misc]

    def metrics(self, values: Mapping[str, Any]) -> None:
        """The operator's final metric values (``AgentMetrics.snapshot``), written when it
        closes: a ``metrics`` record, so a reader of the log gets the totals of a run that
        had no reporter (the demo's summary)."""
        if self.enabled:
            record = {
                "v": SCHEMA_VERSION,
                "ts": round(self._clock() * 1000),
                "kind": "metrics",
                "job": self._job,
                "values": dict(values),
            }
            line = json.dumps(record, ensure_ascii=False, default=repr)
            with self._lock:
                self._sink(line)  # type: ignore[misc]

    def close(self) -> None:
        close = getattr(self._sink, "close", None)
        if close is not None:
            close()

    # -- writing ---------------------------------------------------------------------------

    def _write(
        self,
        kind: str,
        key: Any,
        run_sequence: int,
        step: int | None,
        *,
        payload: Mapping[str, Any] | None = None,
        error: BaseException | str | None = None,
        duration_ms: float | None = None,
        **fields: Any,
    ) -> None:
        record: dict[str, Any] = {
            "v": SCHEMA_VERSION,
            "ts": round(self._clock() * 1000),
            "kind": kind,
            "job": self._job,
            "key": to_jsonable(key),
            "run": run_sequence,
        }
        if step is not None:
            record["step"] = step
        record.update((name, value) for name, value in fields.items() if value is not None)
        if duration_ms is not None:
            record["duration_ms"] = round(duration_ms, 3)
        if error is not None:
            record["error"] = self._payload(_describe(error))
        if payload:
            record.update((name, self._payload(value)) for name, value in payload.items())
        line = json.dumps(self._redactor.redact(record), ensure_ascii=False, default=repr)
        with self._lock:
            self._sink(line)  # type: ignore[misc]

    def _payload(self, value: Any) -> Any:
        """The value in JSON form; at ``standard``, cut to the payload limit (as a string
        once it is too long, so that a line's size stays bounded)."""
        value = self._redactor.redact(to_jsonable(value))
        if not self._limit:
            return value
        text = value if isinstance(value, str) else json.dumps(value, default=repr)
        if len(text) <= self._limit:
            return value
        return truncate(text, self._limit)


def _describe(error: BaseException | str) -> str:
    if isinstance(error, str):
        return error
    return f"{type(error).__name__}: {error}"


def configured_event_log(
    options: AgentOptions,
    subdirectory: str,
    job: str,
    stream: Callable[[str], None] | None = None,
) -> EventLog:
    """The event log ``options`` ask for: off; the lines handed to ``stream`` (a side
    output) when one is given and ``event-log-output`` is ``stream``; else rolled files
    under ``event-log-dir``/``subdirectory`` (one per runner, so no two share a file)."""
    level = options.event_log_level
    if level == EventLogLevel.OFF:
        return EventLog(None, level)
    if stream is not None and options.event_log_output == "stream":
        return EventLog(
            CallbackSink(stream),
            level,
            job=job,
            max_payload_chars=options.event_log_max_payload_chars,
        )
    return EventLog.to_directory(
        options.event_log_directory() / subdirectory,
        level,
        job=job,
        max_payload_chars=options.event_log_max_payload_chars,
        max_bytes=options.event_log_max_file_bytes,
        backup_count=options.event_log_max_files,
    )
