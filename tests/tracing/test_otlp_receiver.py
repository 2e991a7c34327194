"""The test OTLP receiver, fed by the OpenTelemetry SDK's own OTLP exporters over gRPC and
HTTP: spans and metrics come back decoded with their ids, times, attributes and resource, and
the slow and refusing modes behave as a slow or absent collector does."""

from __future__ import annotations

import time
import urllib.error
import urllib.request

import pytest

pytest.importorskip("opentelemetry.sdk", reason="tracing needs the otel extra")
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
    OTLPMetricExporter as GrpcMetricExporter,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
    OTLPMetricExporter as HttpMetricExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.trace import Status, StatusCode

from tests.tracing.otlp_receiver import OtlpReceiver

RESOURCE = Resource.create({"service.name": "receiver-test", "deployment": "loopback"})
ATTRIBUTES = {
    "text": "hello",
    "count": 3,
    "ratio": 0.5,
    "flag": True,
    "words": ["a", "b"],
    "numbers": [1, 2],
}


def span_exporter(receiver: OtlpReceiver, protocol: str, timeout: float = 5.0):
    if protocol == "grpc":
        return GrpcSpanExporter(endpoint=receiver.grpc_endpoint, insecure=True, timeout=timeout)
    return HttpSpanExporter(endpoint=f"{receiver.http_endpoint}/v1/traces", timeout=timeout)


def metric_exporter(receiver: OtlpReceiver, protocol: str):
    if protocol == "grpc":
        return GrpcMetricExporter(endpoint=receiver.grpc_endpoint, insecure=True, timeout=5)
    return HttpMetricExporter(endpoint=f"{receiver.http_endpoint}/v1/metrics", timeout=5)


def tracer_provider(exporter) -> TracerProvider:
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@pytest.fixture
def receiver():
    with OtlpReceiver() as running:
        yield running


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_spans_come_back_with_ids_times_status_attributes_and_resource(receiver, protocol):
    provider = tracer_provider(span_exporter(receiver, protocol))
    tracer = provider.get_tracer("receiver-test-scope")
    with (
        tracer.start_as_current_span("parent") as parent,
        tracer.start_as_current_span("child") as child,
    ):
        child.set_attributes(ATTRIBUTES)
        child.set_status(Status(StatusCode.ERROR, "it broke"))
        child.add_event("noted", {"n": 1})
    provider.shutdown()

    spans = receiver.wait_for(lambda: len(receiver.spans()) == 2 and receiver.spans())
    assert [span["name"] for span in spans] == ["child", "parent"]
    got_child, got_parent = spans
    parent_context, child_context = parent.get_span_context(), child.get_span_context()
    assert got_parent["trace_id"] == got_child["trace_id"] == f"{parent_context.trace_id:032x}"
    assert got_parent["span_id"] == f"{parent_context.span_id:016x}"
    assert got_child["span_id"] == f"{child_context.span_id:016x}"
    assert got_child["parent_span_id"] == got_parent["span_id"]
    assert got_parent["parent_span_id"] is None
    assert got_parent["start_ns"] <= got_child["start_ns"] < got_child["end_ns"]
    assert got_child["end_ns"] <= got_parent["end_ns"]
    assert got_child["status_code"] == "ERROR"
    assert got_child["status_message"] == "it broke"
    assert got_parent["status_code"] == "UNSET"
    assert got_child["kind"] == "INTERNAL"
    assert got_child["attributes"] == ATTRIBUTES
    assert [(e["name"], e["attributes"]) for e in got_child["events"]] == [("noted", {"n": 1})]
    assert got_child["resource"]["service.name"] == "receiver-test"
    assert got_child["resource"]["deployment"] == "loopback"
    assert got_child["scope"] == "receiver-test-scope"
    assert receiver.requests == 2
    assert receiver.metrics() == []


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_metrics_come_back_with_points_attributes_resource_and_scope(receiver, protocol):
    reader = PeriodicExportingMetricReader(
        metric_exporter(receiver, protocol), export_interval_millis=3_600_000
    )
    provider = MeterProvider(resource=RESOURCE, metric_readers=[reader])
    meter = provider.get_meter("receiver-test-meter", version="1.2")
    requests = meter.create_counter("requests")
    requests.add(2, {"route": "/a"})
    requests.add(5, {"route": "/b"})
    meter.create_up_down_counter("queued").add(-3)
    latency = meter.create_histogram("latency", unit="ms")
    for value in (4.0, 40.0):
        latency.record(value)
    provider.force_flush()
    provider.shutdown()

    metrics = receiver.wait_for(lambda: receiver.metrics())
    by_name = {metric["name"]: metric for metric in metrics}
    counter = by_name["requests"]
    assert counter["type"] == "sum"
    assert counter["monotonic"] is True
    assert counter["temporality"] == "CUMULATIVE"
    assert {p["attributes"]["route"]: p["value"] for p in counter["points"]} == {"/a": 2, "/b": 5}
    assert [p["value"] for p in by_name["queued"]["points"]] == [-3]
    assert by_name["queued"]["monotonic"] is False
    [histogram] = by_name["latency"]["points"]
    assert by_name["latency"]["unit"] == "ms"
    assert (histogram["count"], histogram["sum"]) == (2, 44.0)
    assert sum(histogram["bucket_counts"]) == 2
    assert len(histogram["bucket_counts"]) == len(histogram["explicit_bounds"]) + 1
    assert counter["resource"]["service.name"] == "receiver-test"
    assert counter["scope"] == "receiver-test-meter"
    assert receiver.spans() == []


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_refusing_receiver_fails_exports_and_records_nothing(receiver, protocol):
    receiver.refuse = True
    exporter = span_exporter(receiver, protocol, timeout=1.0)
    provider = TracerProvider(resource=RESOURCE)
    tracer = provider.get_tracer("refused")
    with tracer.start_as_current_span("lost") as span:
        pass
    assert exporter.export([span]) == SpanExportResult.FAILURE
    assert receiver.requests >= 1  # it arrived, and was refused (the exporter retries)
    assert receiver.spans() == []

    receiver.refuse = False
    assert exporter.export([span]) == SpanExportResult.SUCCESS
    assert [s["name"] for s in receiver.spans()] == ["lost"]
    exporter.shutdown()


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_slow_receiver_answers_each_export_after_its_delay(protocol):
    with OtlpReceiver(delay_s=0.6) as receiver:
        exporter = span_exporter(receiver, protocol)
        tracer = TracerProvider(resource=RESOURCE).get_tracer("slow")
        with tracer.start_as_current_span("late") as span:
            pass
        started = time.monotonic()
        assert exporter.export([span]) == SpanExportResult.SUCCESS
        assert time.monotonic() - started >= 0.6
        assert [s["name"] for s in receiver.spans()] == ["late"]
        exporter.shutdown()


def test_wait_for_returns_the_predicates_false_value_at_its_timeout(receiver):
    started = time.monotonic()
    assert receiver.wait_for(lambda: receiver.spans(), timeout=0.3) == []
    assert 0.3 <= time.monotonic() - started < 2


def test_the_http_endpoint_rejects_unknown_paths_and_content_types(receiver):
    def post(path: str, content_type: str) -> int:
        request = urllib.request.Request(
            f"{receiver.http_endpoint}{path}",
            data=b"",
            headers={"Content-Type": content_type},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

    assert post("/v1/logs", "application/x-protobuf") == 404
    assert post("/v1/traces", "application/json") == 415
    assert post("/v1/traces", "application/x-protobuf") == 200  # an empty export is valid
    assert receiver.requests == 1
