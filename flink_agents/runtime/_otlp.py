"""Tracing's export over OTLP, through the OpenTelemetry SDK (the ``otel`` extra).

``otlp_sink`` turns the tracer's ``SpanRecord``s into the SDK's finished spans and hands them
to a batch processor, which exports them from its own thread: the operator thread never waits
for the collector. When the collector is slow or down, spans queue up to
``tracing-max-queue``; past that they are dropped, not waited for, and counted (as are spans
whose export failed after the exporter's retries): ``tracing.numOfSpansDropped``.

Where spans go: ``tracing-endpoint`` and ``tracing-protocol`` when set, else the standard
``OTEL_EXPORTER_OTLP_*`` variables (``..._TRACES_ENDPOINT``, ``..._ENDPOINT``,
``..._PROTOCOL``, ``..._HEADERS``, ``..._TIMEOUT``), which the SDK's exporters read
themselves. Headers (a collector's credentials) come only from the environment, never from
options, which travel with the job. The resource is the SDK's (``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``), with the agent's name as ``service.name`` unless the
environment names one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from flink_agents.api import FlinkAgentsError

try:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
except ImportError as missing:  # the extra is not installed
    raise FlinkAgentsError(
        f"tracing: otlp needs the OpenTelemetry SDK: pip install 'pyflink-agents[otel]' ({missing})"
    ) from missing

if TYPE_CHECKING:
    from flink_agents.runtime._options import AgentOptions
    from flink_agents.runtime._tracing import SpanRecord

PROTOCOLS = ("grpc", "http/protobuf")
CLOSE_WAIT_S = 5.0
"""How long a closing subtask waits for its spans' export at most."""
_SCOPE = InstrumentationScope("flink_agents")
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


class OtlpSink:
    """Hands spans to a batch processor over an OTLP exporter, dropping (and counting)
    those that would queue past ``max_queue``."""

    def __init__(self, exporter: SpanExporter, resource: Resource, max_queue: int) -> None:
        self._resource = resource
        self._max_queue = max_queue
        self._lock = threading.Lock()
        self._queued = 0
        self._dropped = 0
        self._given_up = False
        """``close`` counted what was still queued as dropped: exports ending later are
        not counted again."""
        self._processor = BatchSpanProcessor(
            _Counting(exporter, self._exported),
            max_queue_size=max_queue,
            max_export_batch_size=min(512, max_queue),
        )

    def __call__(self, record: SpanRecord) -> None:
        with self._lock:
            if self._queued >= self._max_queue:
                self._dropped += 1
                return
            self._queued += 1
        self._processor.on_end(self._span(record))

    def dropped(self) -> int:
        """Spans dropped so far: a full queue's, and those whose export failed."""
        return self._dropped

    def _exported(self, count: int, ok: bool) -> None:
        with self._lock:
            if self._given_up:
                return
            self._queued -= count
            if not ok:
                self._dropped += count

    def _span(self, record: SpanRecord) -> ReadableSpan:
        context = SpanContext(record.trace_id, record.span_id, False, _SAMPLED)
        parent = None
        if record.parent_id is not None:
            parent = SpanContext(record.trace_id, record.parent_id, False, _SAMPLED)
        status = Status(StatusCode.UNSET)
        if record.error is not None:
            status = Status(StatusCode.ERROR, record.error)
        attributes = dict(record.attributes)
        if record.error is not None:
            attributes.setdefault("error.type", record.error.partition(":")[0])
        return ReadableSpan(
            record.name,
            context,
            parent,
            self._resource,
            attributes,
            kind=SpanKind.CLIENT if record.client else SpanKind.INTERNAL,
            status=status,
            start_time=record.start_ns,
            end_time=record.end_ns,
            instrumentation_scope=_SCOPE,
        )

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Export what is queued, waiting ``wait_s`` at most: a collector that is down
        would hold a closing subtask for the exporter's retries of every batch (half a
        minute and more). What is still queued then is given up and counted as dropped."""
        closing = threading.Thread(
            target=self._processor.shutdown, name="flink-agents-trace-close", daemon=True
        )
        closing.start()
        closing.join(wait_s)
        if closing.is_alive():
            with self._lock:
                self._dropped += self._queued
                self._queued, self._given_up = 0, True


class _Counting(SpanExporter):
    """An exporter that tells ``done`` how many spans each export took and whether it
    succeeded."""

    def __init__(self, inner: SpanExporter, done: Callable[[int, bool], None]) -> None:
        self._inner = inner
        self._done = done

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        ok = False
        try:
            result = self._inner.export(spans)
            ok = result is SpanExportResult.SUCCESS
            return result
        finally:
            self._done(len(spans), ok)

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._inner.force_flush(timeout_millis)


def exporter_for(options: AgentOptions) -> SpanExporter:
    """The OTLP span exporter ``options`` (else the environment) ask for."""
    protocol = (
        options.tracing_protocol
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if protocol not in PROTOCOLS:
        raise FlinkAgentsError(
            f"tracing: unknown OTLP protocol {protocol!r}; use one of {', '.join(PROTOCOLS)}"
        )
    endpoint = options.tracing_endpoint
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=endpoint)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpanExporter,
    )

    if endpoint is not None and not endpoint.rstrip("/").endswith("/v1/traces"):
        endpoint = f"{endpoint.rstrip('/')}/v1/traces"  # as the standard variable is read
    return HttpSpanExporter(endpoint=endpoint)


def otlp_sink(options: AgentOptions, job: str, agent: str) -> OtlpSink:
    """Where a tracer's spans go with ``tracing: otlp``."""
    attributes = {"flink_agents.job": job}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = agent
    return OtlpSink(exporter_for(options), Resource.create(attributes), options.tracing_max_queue)
