"""Traces of runs: a span for each run, action, durable call and sub-agent run.

A run is one trace. Its root span (``invoke_agent <agent>``) has a child span for each of
its actions; an action's durable calls (model calls, tool calls, MCP calls, retrievals, a
user's own calls) and the sub-agents it runs are children of the action's span, and a
sub-agent's actions children of its run's span. Model and tool calls carry the OpenTelemetry
GenAI semantic conventions (``gen_ai.*``) and the OpenInference span kinds that Arize
Phoenix reads; every span carries our own attributes (``flink_agents.*``: job, key, run
sequence, step, attempt, whether it was replayed from the action log).

Identity. The ids of a run's trace and of its run, action and sub-run spans derive from
what they are (job, agent, key, run sequence; step, action and attempt; the sub-run's place
in its caller), not from chance. A span is exported when what it describes ends, so work a
failure interrupts exports nothing of itself, only what it finished inside (a model call);
when a restore runs the run again, the work that ends then exports the span with the same
id, and what finished before the failure stays in place under it. What the restore does not
run again (an action or a durable call answered from the action log) gets a span of its
own, marked ``flink_agents.replayed``, which carries no token usage (the original's span
counted it). An action the restore runs again although it had ended (one the log does not
record: it made no durable call) exports its span a second time under the same id, as an
OTLP exporter's retry may deliver any span twice; collectors keep one. A run that fails the
job (``error-policy: fail``) exports no root then: the job restarts and runs it again (its
failed action's span carries the error).

Content. Prompts, completions, tool arguments and results, inputs and outputs are
attributes only with ``tracing-content: true``, redacted and cut as the event log's payloads
are (``Redactor``, ``event-log-max-payload-chars``). Secrets never appear: every string
attribute goes through the redactor.

Spans are plain ``SpanRecord`` values handed to a sink: the OTLP exporter
(``runtime/_otlp.py``, which needs the ``otel`` extra) or a list in tests. Everything here
runs only when tracing is on: otherwise the runtime holds None for a tracer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from flink_agents.api import BaseChatModel, ChatResponse, KnowledgeSet, Tool
from flink_agents.runtime._event_log import Redactor, to_jsonable, truncate

if TYPE_CHECKING:
    from flink_agents.runtime._options import AgentOptions

logger = logging.getLogger(__name__)

MAX_OPEN_RUNS = 100_000
"""Runs whose start (and replays) a tracer remembers at most (runs in progress, waiting or
set aside): past it, the oldest is forgotten, and its root span starts at its first action
known since."""

RUNS_KEPT = 1024
"""Recent runs whose trace id and key text a tracer keeps (oldest out)."""

# Span kinds as OpenInference names them (Phoenix draws a span by its kind).
AGENT, CHAIN, LLM, TOOL, RETRIEVER = "AGENT", "CHAIN", "LLM", "TOOL", "RETRIEVER"


@dataclass(frozen=True)
class SpanRecord:
    """One finished span, as the tracer hands it to its sink."""

    name: str
    trace_id: int
    """128 bits."""
    span_id: int
    """64 bits."""
    parent_id: int | None
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None
    """The failure's description (the span's status is then an error)."""
    client: bool = False
    """A call out of the process (a model, a tool, a store): OpenTelemetry's client kind."""


SpanSink = Callable[[SpanRecord], None]


def _digest(*parts: Any, size: int) -> int:
    """A non-zero id of ``size`` bytes derived from ``parts``."""
    text = "\x1f".join(map(str, parts)).encode("utf-8", "surrogatepass")
    value = int.from_bytes(hashlib.blake2b(text, digest_size=size).digest(), "big")
    return value or 1


def _key_text(key: Any) -> str:
    """The key as JSON (the form the event log writes it in), for its spans' attribute."""
    return json.dumps(to_jsonable(key), sort_keys=True, ensure_ascii=False)


class Tracer:
    """Makes the spans of one agent operator's runs and hands them to ``sink``.

    The driver calls ``run_started`` and ``run_finished``; the engine ``action_finished``,
    ``action_replayed`` and ``sub_run_finished``; an action's context ``call`` for each
    durable call. Thread-safe (a durable call's span is made on the thread that ends it).

    Args:
        sink: where finished spans go.
        job: the job's id (the same in every attempt and subtask).
        agent: the agent's name (the root span's ``gen_ai.agent.name``).
        content: whether prompts, completions, inputs and outputs are recorded.
        max_payload_chars: the cut of a recorded content value (0: none).
        redactor: hides secrets (the environment's, by default).
        dropped: how many spans the sink dropped so far, for the metrics (None: it drops
            none).
        close: exports what the sink holds and stops it (``close``).
    """

    def __init__(
        self,
        sink: SpanSink,
        *,
        job: str,
        agent: str,
        content: bool = False,
        max_payload_chars: int = 2000,
        redactor: Redactor | None = None,
        dropped: Callable[[], int] | None = None,
        close: Callable[[], None] | None = None,
    ) -> None:
        self._sink = sink
        self.job = job
        self.agent = agent
        self.content = content
        self._limit = max_payload_chars
        self._redactor = redactor if redactor is not None else Redactor.from_environment()
        self.dropped = dropped or (lambda: 0)
        self._close = close
        self._lock = threading.Lock()
        self._runs: dict[tuple[str, int], int] = {}
        """When each run in progress started (ns), by (key text, run sequence)."""
        self._replays: dict[tuple[str, int], int] = {}
        """Actions of each run in progress answered from the action log in this process."""
        self.exported = 0
        """Spans handed to the sink."""
        self._known: dict[tuple[Any, int], tuple[int, str]] = {}
        """Recent runs' trace ids and key texts, by (key, run sequence)."""

    # -- ids ---------------------------------------------------------------------------------

    def trace_id(self, key: Any, sequence: int) -> int:
        """A run's trace (the same in every attempt and process)."""
        return self._run(key, sequence)[0]

    def _run(self, key: Any, sequence: int) -> tuple[int, str]:
        """A run's trace id and its key's JSON text, kept for recent runs (a run's spans
        ask for them a dozen times)."""
        try:
            known = self._known.get((key, sequence))
        except TypeError:  # a key that is no dict key: made each time
            text = _key_text(key)
            return _digest(self.job, self.agent, text, sequence, size=16), text
        if known is None:
            text = _key_text(key)
            known = _digest(self.job, self.agent, text, sequence, size=16), text
            with self._lock:
                self._known[(key, sequence)] = known
                if len(self._known) > RUNS_KEPT:
                    del self._known[next(iter(self._known))]
        return known

    def run_span_id(self, key: Any, sequence: int) -> int:
        """The root span of a run: the same in every execution of the run."""
        return _digest(self.trace_id(key, sequence), "run", size=8)

    def action_span_id(self, key: Any, sequence: int, step: int, action: str, attempt: int) -> int:
        """An action's span (``step``, ``action``: as the action log records it, which for a
        sub-agent's action names the sub-run; ``attempt``: its failed attempts before)."""
        return _digest(self.trace_id(key, sequence), "action", step, action, attempt, size=8)

    def sub_run_span_id(self, key: Any, sequence: int, namespace: str, attempt: int) -> int:
        """A sub-run's span (``namespace``: its place in the calling action, whose failed
        attempts before are ``attempt``)."""
        return _digest(self.trace_id(key, sequence), "sub-run", namespace, attempt, size=8)

    @staticmethod
    def new_span_id() -> int:
        """A span of no identity of its own: a durable call's, a replayed action's."""
        return random.getrandbits(64) or 1

    # -- runs --------------------------------------------------------------------------------

    def run_started(self, key: Any, sequence: int) -> None:
        run = (self._run(key, sequence)[1], sequence)
        with self._lock:
            self._runs[run] = time.time_ns()
            _bound(self._runs)

    def run_finished(
        self,
        key: Any,
        sequence: int,
        outcome: str,
        input: Any = None,
        error: BaseException | str | None = None,
    ) -> None:
        """A run ended: ``outcome`` as the event log's (``succeeded``, ``error_output``,
        ``failed``)."""
        end = time.time_ns()
        run = (self._run(key, sequence)[1], sequence)
        with self._lock:
            start = self._runs.pop(run, end)
            replays = self._replays.pop(run, 0)
        attributes = self._identity(key, sequence)
        attributes.update(
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": self.agent,
                "openinference.span.kind": AGENT,
                "flink_agents.run.outcome": outcome,
            }
        )
        if replays:  # this execution followed a restore
            attributes["flink_agents.run.replayed_actions"] = replays
        if self.content and input is not None:
            attributes["input.value"] = self._text(input)
        self._emit(
            SpanRecord(
                f"invoke_agent {self.agent}",
                self.trace_id(key, sequence),
                self.run_span_id(key, sequence),
                None,
                start,
                end,
                attributes,
                self._error(error),
            )
        )

    def _seen(self, key: Any, sequence: int, start: int) -> None:
        """A run's span starts no later than its first action known here (a run restored
        from a checkpoint, which this process did not start)."""
        run = (self._run(key, sequence)[1], sequence)
        with self._lock:
            self._runs.setdefault(run, start)
            _bound(self._runs)

    # -- actions -----------------------------------------------------------------------------

    def action_finished(
        self,
        key: Any,
        sequence: int,
        step: int,
        action: str,
        attempt: int,
        span_id: int,
        parent_id: int,
        start_ns: int,
        events: Sequence[Any] = (),
        error: BaseException | None = None,
    ) -> None:
        """An action ran (from ``start_ns`` to now) and completed, or failed with ``error``
        (``action``, ``step``: as the action log records it; ``parent_id``: its run's root,
        or a sub-run's span)."""
        end = time.time_ns()
        self._seen(key, sequence, start_ns)
        attributes = self._action_attributes(key, sequence, step, action, attempt)
        attributes["flink_agents.replayed"] = False
        attributes["flink_agents.events"] = [type(event).__name__ for event in events]
        if self.content and events:
            attributes["output.value"] = self._text(events)
        self._emit(
            SpanRecord(
                f"action {_short(action)}",
                self.trace_id(key, sequence),
                span_id,
                parent_id,
                start_ns,
                end,
                attributes,
                self._error(error),
            )
        )

    def action_replayed(
        self,
        key: Any,
        sequence: int,
        step: int,
        action: str,
        attempt: int,
        parent_id: int,
        events: Sequence[Any],
    ) -> None:
        """An action was answered from the action log (its effects applied again, nothing
        run): a span of no length, marked replayed, beside the original's."""
        now = time.time_ns()
        self._seen(key, sequence, now)
        run = (self._run(key, sequence)[1], sequence)
        with self._lock:
            self._replays[run] = self._replays.get(run, 0) + 1
            _bound(self._replays)
        attributes = self._action_attributes(key, sequence, step, action, attempt)
        attributes["flink_agents.replayed"] = True
        attributes["flink_agents.events"] = [type(event).__name__ for event in events]
        self._emit(
            SpanRecord(
                f"action {_short(action)}",
                self.trace_id(key, sequence),
                self.new_span_id(),
                parent_id,
                now,
                now,
                attributes,
            )
        )

    def _action_attributes(
        self, key: Any, sequence: int, step: int, action: str, attempt: int
    ) -> dict[str, Any]:
        attributes = self._identity(key, sequence)
        attributes.update(
            {
                "openinference.span.kind": CHAIN,
                "flink_agents.action": action,
                "flink_agents.step": step,
                "flink_agents.attempt": attempt + 1,
            }
        )
        return attributes

    def sub_run_finished(
        self,
        key: Any,
        sequence: int,
        step: int,
        namespace: str,
        agent: str,
        span_id: int,
        parent_id: int,
        start_ns: int,
        error: BaseException | None = None,
    ) -> None:
        """A sub-agent's run (``namespace``: where its actions are recorded; ``parent_id``:
        the calling action's span) ended."""
        attributes = self._identity(key, sequence)
        attributes.update(
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": agent,
                "openinference.span.kind": AGENT,
                "flink_agents.step": step,
                "flink_agents.sub_run": namespace,
            }
        )
        self._emit(
            SpanRecord(
                f"invoke_agent {agent}",
                self.trace_id(key, sequence),
                span_id,
                parent_id,
                start_ns,
                time.time_ns(),
                attributes,
                self._error(error),
            )
        )

    # -- durable calls -----------------------------------------------------------------------

    def call(
        self,
        key: Any,
        sequence: int,
        parent_id: int,
        function: Callable[..., Any],
        name: str,
        args: tuple,
        start_ns: int,
        end_ns: int,
        *,
        result: Any = None,
        error: BaseException | None = None,
        replayed: bool = False,
    ) -> None:
        """A durable call of an action (``parent_id``: the action's span) ended, or was
        answered from the action log (``replayed``). ``name``: its function's durable
        name."""
        attributes = self._identity(key, sequence)
        attributes["flink_agents.durable_call"] = name
        attributes["flink_agents.replayed"] = replayed
        span_name, client = self._describe(function, name, args, result, replayed, attributes)
        self._emit(
            SpanRecord(
                span_name,
                self.trace_id(key, sequence),
                self.new_span_id(),
                parent_id,
                start_ns,
                max(end_ns, start_ns),
                attributes,
                self._error(error),
                client,
            )
        )

    def _describe(
        self,
        function: Callable[..., Any],
        name: str,
        args: tuple,
        result: Any,
        replayed: bool,
        attributes: dict[str, Any],
    ) -> tuple[str, bool]:
        """A durable call's span name and kind, its attributes added: a model's, a tool's
        and a retrieval's by the conventions, any other call by its durable name."""
        owner = getattr(function, "__self__", None)
        if isinstance(owner, BaseChatModel):
            return self._model_call(owner, args, result, replayed, attributes), True
        if isinstance(owner, Tool):
            spec = owner.metadata
            attributes.update(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": spec.name,
                    "gen_ai.tool.type": "function",
                    "openinference.span.kind": TOOL,
                    "tool.name": spec.name,
                }
            )
            server = getattr(owner, "server", None)
            if server is not None:  # an MCP server's tool
                attributes["flink_agents.tool.source"] = "mcp"
            if self.content:
                if args:
                    attributes["gen_ai.tool.call.arguments"] = self._text(args[0])
                    attributes["input.value"] = attributes["gen_ai.tool.call.arguments"]
                if result is not None:
                    attributes["gen_ai.tool.call.result"] = self._text(result)
                    attributes["output.value"] = attributes["gen_ai.tool.call.result"]
            return f"execute_tool {spec.name}", True
        if isinstance(owner, KnowledgeSet) or name.endswith(":search_knowledge_set"):
            attributes["openinference.span.kind"] = RETRIEVER
            attributes["flink_agents.operation"] = "retrieval"
            if isinstance(result, list):
                attributes["flink_agents.retrieval.documents"] = len(result)
            if self.content and args:
                attributes["input.value"] = self._text(args[-2] if len(args) > 1 else args[0])
            return "retrieval", True
        attributes["openinference.span.kind"] = CHAIN
        return f"durable_call {name.rpartition(':')[2] or name}", False

    def _model_call(
        self,
        model: BaseChatModel,
        args: tuple,
        result: Any,
        replayed: bool,
        attributes: dict[str, Any],
    ) -> str:
        requested = getattr(model, "model", None) or type(model).__name__
        attributes.update(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": _provider(model),
                "gen_ai.request.model": requested,
                "openinference.span.kind": LLM,
                "llm.model_name": requested,
            }
        )
        if isinstance(result, ChatResponse):
            if result.model:
                attributes["gen_ai.response.model"] = result.model
            if result.finish_reason:
                attributes["gen_ai.response.finish_reasons"] = [result.finish_reason]
            attributes["flink_agents.model.attempts"] = result.attempts
            usage = result.usage
            if not replayed:  # the original call's span counted them
                attributes.update(
                    {
                        "gen_ai.usage.input_tokens": usage.prompt_tokens,
                        "gen_ai.usage.output_tokens": usage.completion_tokens,
                        "llm.token_count.prompt": usage.prompt_tokens,
                        "llm.token_count.completion": usage.completion_tokens,
                        "llm.token_count.total": usage.total_tokens,
                    }
                )
                if usage.cached_tokens:
                    attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cached_tokens
        if self.content:
            if args:
                attributes["gen_ai.input.messages"] = self._text(args[0])
                attributes["input.value"] = attributes["gen_ai.input.messages"]
            if isinstance(result, ChatResponse):
                attributes["gen_ai.output.messages"] = self._text([result.message])
                attributes["output.value"] = attributes["gen_ai.output.messages"]
        return f"chat {requested}"

    # -- writing -----------------------------------------------------------------------------

    def _identity(self, key: Any, sequence: int) -> dict[str, Any]:
        return {
            "flink_agents.job": self.job,
            "flink_agents.agent": self.agent,
            "flink_agents.key": self._run(key, sequence)[1],
            "flink_agents.run.sequence": sequence,
        }

    def _text(self, value: Any) -> str:
        """A content value as JSON text, redacted and cut to the payload limit."""
        value = self._redactor.redact(to_jsonable(value))
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return truncate(text, self._limit)

    def _error(self, error: BaseException | str | None) -> str | None:
        if error is None:
            return None
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        # Redacted before it is cut: a cut through a secret would leave part of it.
        return truncate(self._redactor.redact(text), self._limit)

    def _emit(self, span: SpanRecord) -> None:
        """Hand ``span`` to the sink, every string in it redacted (a tool's or a function's
        name could quote a secret as well as an error can)."""
        redact = self._redactor.redact
        span = replace(span, name=redact(span.name), attributes=redact(span.attributes))
        with self._lock:
            self.exported += 1
        self._sink(span)

    def close(self) -> None:
        """Export what is still queued (within the exporter's timeout) and stop."""
        if self._close is not None:
            self._close()


def _bound(runs: dict[Any, Any]) -> None:
    """Forget the oldest run of ``runs`` past ``MAX_OPEN_RUNS`` (one that never ended here:
    its job failed, or it moved to another subtask)."""
    if len(runs) > MAX_OPEN_RUNS:
        del runs[next(iter(runs))]


def _short(action: str) -> str:
    """An action's own name (a sub-agent's action is recorded as ``.../<step>:<name>``)."""
    return action.rpartition("/")[2].partition(":")[2] or action


def _provider(model: BaseChatModel) -> str:
    module = type(model).__module__
    return "openai" if "openai" in module.lower() else type(model).__name__


def configured_tracer(options: AgentOptions, job: str, agent: str) -> Tracer | None:
    """The tracer ``options`` ask for (``tracing``), or None when tracing is off.

    Raises:
        FlinkAgentsError: tracing is on and the ``otel`` extra is not installed.
    """
    if options.tracing == "off":
        return None
    from flink_agents.runtime._otlp import otlp_sink

    sink = otlp_sink(options, job, agent)
    return Tracer(
        sink,
        job=job,
        agent=agent,
        content=options.tracing_content,
        max_payload_chars=options.event_log_max_payload_chars,
        dropped=sink.dropped,
        close=sink.close,
    )


class CallSpan:
    """A durable call's span in the making: started when an action makes the call, ended
    (and exported) on the thread that ends it, or at once for a call the action log
    answers."""

    __slots__ = ("_args", "_function", "_identity", "_name", "_start", "_tracer")

    def __init__(
        self,
        tracer: Tracer,
        identity: tuple[Any, int, int],
        function: Callable[..., Any],
        name: str,
        args: tuple,
    ) -> None:
        self._tracer = tracer
        self._identity = identity
        """The calling action's key, run sequence and span."""
        self._function = function
        self._name = name
        self._args = args
        self._start = time.time_ns()

    def ended(self, result: Any = None, error: BaseException | None = None) -> None:
        self._export(time.time_ns(), result, error, replayed=False)

    def replayed(self, result: Any = None, error: BaseException | None = None) -> None:
        self._export(self._start, result, error, replayed=True)

    def _export(self, end: int, result: Any, error: BaseException | None, replayed: bool) -> None:
        try:
            self._tracer.call(
                *self._identity,
                self._function,
                self._name,
                self._args,
                self._start,
                end,
                result=result,
                error=error,
                replayed=replayed,
            )
        except Exception:  # a span is never worth the call's failure
            logger.warning("could not trace a call of %s", self._name, exc_info=True)

    def watch(self, future: Any) -> None:
        """End the span when ``future`` is done (on the thread that completes it)."""
        future.add_done_callback(self._done)

    def _done(self, future: Any) -> None:
        if future.cancelled():  # the job stops: the call is made again after a restore
            return
        error = future.exception()
        self.ended(None if error is not None else future.result(), error)
