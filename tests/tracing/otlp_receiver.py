"""A real OTLP receiver for tests: OTLP/gRPC and OTLP/HTTP (protobuf) on loopback.

It is built on the protocol's own definitions as shipped in ``opentelemetry-proto`` (the
collector services and their messages) and grpcio, plus the standard library's HTTP server
for ``POST /v1/traces`` and ``POST /v1/metrics``. Whatever speaks OTLP can export to it: the
Python SDK's exporters, Flink's OpenTelemetry metric reporter (Java), a collector.

What arrives is decoded into plain dictionaries (``spans()``, ``metrics()``), so a test
asserts on values, never on protobuf objects::

    with OtlpReceiver() as receiver:
        ...  # export to receiver.grpc_endpoint or receiver.http_endpoint
        assert receiver.wait_for(lambda: receiver.spans(), timeout=10)

For tests of a slow or absent collector, ``delay_s`` holds every answer back and ``refuse``
answers ``UNAVAILABLE`` (gRPC) or ``503`` (HTTP); both may be changed while it runs.
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

import grpc
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.metrics.v1 import (
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

__all__ = ["OtlpReceiver", "any_value", "attributes", "decode_metrics", "decode_spans"]

T = TypeVar("T")

_HOST = "127.0.0.1"
_PROTOBUF = "application/x-protobuf"


# ---------------------------------------------------------------------------------------------
# Decoding: protobuf messages to plain values


def any_value(value: AnyValue) -> Any:
    """An ``AnyValue`` as Python: str, int, float, bool, bytes, list, dict, or None when
    unset."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    return getattr(value, kind)


def attributes(key_values: Iterable[KeyValue]) -> dict[str, Any]:
    """Repeated ``KeyValue`` (attributes) as a plain dict."""
    return {item.key: any_value(item.value) for item in key_values}


def _hex(identifier: bytes) -> str | None:
    """A trace or span id as lower-case hex; None for an empty (absent) id."""
    return identifier.hex() or None


def _enum_name(enum: Any, number: int, prefix: str) -> str:
    """``STATUS_CODE_ERROR`` -> ``ERROR``: an enum value's name without its prefix."""
    return enum.Name(number).removeprefix(prefix)


def decode_spans(request: trace_service_pb2.ExportTraceServiceRequest) -> list[dict[str, Any]]:
    """Every span of an export request, each with its resource's attributes and scope."""
    spans = []
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    {
                        "name": span.name,
                        "trace_id": _hex(span.trace_id),
                        "span_id": _hex(span.span_id),
                        "parent_span_id": _hex(span.parent_span_id),
                        "kind": _enum_name(trace_pb2.Span.SpanKind, span.kind, "SPAN_KIND_"),
                        "start_ns": span.start_time_unix_nano,
                        "end_ns": span.end_time_unix_nano,
                        "status_code": _enum_name(
                            trace_pb2.Status.StatusCode, span.status.code, "STATUS_CODE_"
                        ),
                        "status_message": span.status.message,
                        "attributes": attributes(span.attributes),
                        "events": [
                            {
                                "name": event.name,
                                "time_ns": event.time_unix_nano,
                                "attributes": attributes(event.attributes),
                            }
                            for event in span.events
                        ],
                        "resource": resource,
                        "scope": scope_spans.scope.name,
                    }
                )
    return spans


def _point(data_kind: str, point: Message) -> dict[str, Any]:
    """One data point: its attributes, times and value(s) by the metric's kind."""
    decoded: dict[str, Any] = {
        "attributes": attributes(point.attributes),
        "start_ns": point.start_time_unix_nano,
        "time_ns": point.time_unix_nano,
    }
    if data_kind in ("gauge", "sum"):
        decoded["value"] = getattr(point, point.WhichOneof("value") or "as_int")
    elif data_kind == "summary":
        decoded["count"] = point.count
        decoded["sum"] = point.sum
        decoded["quantiles"] = {q.quantile: q.value for q in point.quantile_values}
    else:  # histogram, exponential_histogram
        decoded["count"] = point.count
        decoded["sum"] = point.sum if point.HasField("sum") else None
        if data_kind == "histogram":
            decoded["bucket_counts"] = list(point.bucket_counts)
            decoded["explicit_bounds"] = list(point.explicit_bounds)
    return decoded


def decode_metrics(
    request: metrics_service_pb2.ExportMetricsServiceRequest,
) -> list[dict[str, Any]]:
    """Every metric of an export request, each with its data points, resource and scope.

    ``type`` is the data's kind (``gauge``, ``sum``, ``histogram``, ``exponential_histogram``,
    ``summary``); a sum also has ``temporality`` (``DELTA`` or ``CUMULATIVE``) and
    ``monotonic``.
    """
    metrics = []
    for resource_metrics in request.resource_metrics:
        resource = attributes(resource_metrics.resource.attributes)
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                data_kind = metric.WhichOneof("data")
                data = getattr(metric, data_kind) if data_kind else None
                decoded = {
                    "name": metric.name,
                    "description": metric.description,
                    "unit": metric.unit,
                    "type": data_kind,
                    "points": [_point(data_kind, point) for point in data.data_points]
                    if data is not None
                    else [],
                    "resource": resource,
                    "scope": scope_metrics.scope.name,
                    "scope_attributes": attributes(scope_metrics.scope.attributes),
                }
                if data_kind in ("sum", "histogram", "exponential_histogram"):
                    decoded["temporality"] = _enum_name(
                        metrics_pb2.AggregationTemporality,
                        data.aggregation_temporality,
                        "AGGREGATION_TEMPORALITY_",
                    )
                if data_kind == "sum":
                    decoded["monotonic"] = data.is_monotonic
                metrics.append(decoded)
    return metrics


# ---------------------------------------------------------------------------------------------
# The two transports, both handing requests to OtlpReceiver.accept


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._receiver = receiver

    def Export(self, request, context):  # the service's method name
        if not self._receiver.accept("traces", request):
            context.abort(grpc.StatusCode.UNAVAILABLE, "refused by the test receiver")
        return trace_service_pb2.ExportTraceServiceResponse()


class _MetricsService(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._receiver = receiver

    def Export(self, request, context):  # the service's method name
        if not self._receiver.accept("metrics", request):
            context.abort(grpc.StatusCode.UNAVAILABLE, "refused by the test receiver")
        return metrics_service_pb2.ExportMetricsServiceResponse()


_HTTP_ROUTES = {
    "/v1/traces": (
        "traces",
        trace_service_pb2.ExportTraceServiceRequest,
        trace_service_pb2.ExportTraceServiceResponse,
    ),
    "/v1/metrics": (
        "metrics",
        metrics_service_pb2.ExportMetricsServiceRequest,
        metrics_service_pb2.ExportMetricsServiceResponse,
    ),
}


class _HttpHandler(BaseHTTPRequestHandler):
    """OTLP/HTTP with protobuf bodies (``gzip`` or ``deflate`` encoded, or plain)."""

    server: _HttpServer
    protocol_version = "HTTP/1.1"  # keep-alive, as exporters expect

    def do_POST(self) -> None:  # http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        route = _HTTP_ROUTES.get(self.path.split("?", 1)[0])
        if route is None:
            self._answer(404, b"")
            return
        kind, request_type, response_type = route
        content_type = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip()
        if content_type != _PROTOBUF:
            self._answer(415, b"only application/x-protobuf", "text/plain")
            return
        try:
            request = request_type.FromString(_decompress(body, self.headers))
        except (DecodeError, OSError, EOFError, zlib.error) as error:
            self._answer(400, str(error).encode(), "text/plain")
            return
        if self.server.receiver.accept(kind, request):
            self._answer(200, response_type().SerializeToString(), _PROTOBUF)
        else:
            self._answer(503, b"refused by the test receiver", "text/plain")

    def _answer(self, status: int, body: bytes, content_type: str = _PROTOBUF) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a test's output is not the place for an access log."""


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True  # a delayed answer never holds the test process at its end

    def __init__(self, receiver: OtlpReceiver) -> None:
        super().__init__((_HOST, 0), _HttpHandler)
        self.receiver = receiver


def _decompress(body: bytes, headers: Any) -> bytes:
    encoding = (headers.get("Content-Encoding") or "").strip().lower()
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    return body


# ---------------------------------------------------------------------------------------------


class OtlpReceiver:
    """An OTLP receiver on loopback (gRPC and HTTP, each on a free port), collecting the spans
    and metrics exported to it. A context manager: ``with OtlpReceiver() as receiver``.

    Attributes:
        delay_s: seconds every export waits before it is answered (and recorded).
        refuse: when true, exports are answered ``UNAVAILABLE`` / ``503`` and not recorded.
        grpc_endpoint: ``http://127.0.0.1:<port>`` for OTLP/gRPC exporters.
        http_endpoint: ``http://127.0.0.1:<port>``, the base of OTLP/HTTP's ``/v1/traces``
            and ``/v1/metrics``.

    Both ``delay_s`` and ``refuse`` are read when each export arrives at its answer, so a test
    may change them while exporters run. An export is recorded when it is accepted, after its
    delay; ``requests`` counts every export that arrived, refused ones included.
    """

    def __init__(self, *, delay_s: float = 0.0, refuse: bool = False) -> None:
        self.delay_s = delay_s
        self.refuse = refuse
        self.grpc_endpoint = ""
        self.http_endpoint = ""
        self._changed = threading.Condition()
        self._version = 0  # grows with every export that arrives
        self._requests = 0
        self._spans: list[dict[str, Any]] = []
        self._metrics: list[dict[str, Any]] = []
        self._stopping = threading.Event()
        self._grpc_server: grpc.Server | None = None
        self._grpc_workers: ThreadPoolExecutor | None = None
        self._http_server: _HttpServer | None = None
        self._http_thread: threading.Thread | None = None

    # -- life cycle -----------------------------------------------------------------------

    def start(self) -> OtlpReceiver:
        """Start both servers on free loopback ports; returns self."""
        self._stopping.clear()
        self._grpc_workers = ThreadPoolExecutor(max_workers=8, thread_name_prefix="otlp-grpc")
        server = grpc.server(self._grpc_workers)
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceService(self), server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(_MetricsService(self), server)
        port = server.add_insecure_port(f"{_HOST}:0")
        server.start()
        self._grpc_server = server
        self.grpc_endpoint = f"http://{_HOST}:{port}"

        self._http_server = _HttpServer(self)
        self._http_thread = threading.Thread(
            target=self._http_server.serve_forever, name="otlp-http", daemon=True
        )
        self._http_thread.start()
        self.http_endpoint = f"http://{_HOST}:{self._http_server.server_address[1]}"
        return self

    def stop(self) -> None:
        """Stop both servers; exports still waiting out their delay are dropped."""
        self._stopping.set()
        if self._grpc_server is not None:
            self._grpc_server.stop(grace=None).wait()
            self._grpc_server = None
        if self._grpc_workers is not None:
            self._grpc_workers.shutdown(wait=False, cancel_futures=True)
            self._grpc_workers = None
        if self._http_server is not None:
            self._http_server.shutdown()
            self._http_server.server_close()
            self._http_server = None
        if self._http_thread is not None:
            self._http_thread.join()
            self._http_thread = None

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- what arrived ---------------------------------------------------------------------

    @property
    def requests(self) -> int:
        """Export requests that arrived over either protocol, refused ones included."""
        with self._changed:
            return self._requests

    def spans(self) -> list[dict[str, Any]]:
        """Every span received so far, in arrival order (see ``decode_spans``)."""
        with self._changed:
            return list(self._spans)

    def metrics(self) -> list[dict[str, Any]]:
        """Every metric received so far, one entry per metric per export, in arrival order
        (see ``decode_metrics``)."""
        with self._changed:
            return list(self._metrics)

    def clear(self) -> None:
        """Forget what was received (``requests`` included)."""
        with self._changed:
            self._spans.clear()
            self._metrics.clear()
            self._requests = 0

    def wait_for(self, predicate: Callable[[], T], timeout: float = 10.0) -> T:
        """Call ``predicate`` now and after every export that arrives until it returns a
        true value or ``timeout`` seconds pass; returns its last value (false on timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._changed:
                seen = self._version
            value = predicate()
            remaining = deadline - time.monotonic()
            if value or remaining <= 0:
                return value
            with self._changed:
                if self._version == seen:
                    self._changed.wait(remaining)

    # -- called by the transports ---------------------------------------------------------

    def accept(self, kind: str, request: Message) -> bool:
        """Record an export request of ``kind`` (``traces`` or ``metrics``) after the delay;
        False when it is refused (or the receiver stops during the delay)."""
        with self._changed:
            self._requests += 1
            self._version += 1
            self._changed.notify_all()
        if self.delay_s > 0 and self._stopping.wait(self.delay_s):
            return False
        if self.refuse:
            return False
        decoded = decode_spans(request) if kind == "traces" else decode_metrics(request)
        with self._changed:
            (self._spans if kind == "traces" else self._metrics).extend(decoded)
            self._version += 1
            self._changed.notify_all()
        return True
