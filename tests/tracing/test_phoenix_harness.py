"""The Phoenix harness against a real Phoenix: spans sent with the OpenTelemetry SDK over
OTLP/HTTP and OTLP/gRPC come back through its REST API as sent, and Chromium takes a
screenshot of the trace's page."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, NamedTuple

import pytest

pytest.importorskip("opentelemetry.sdk", reason="tracing needs the otel extra")
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

from tests.tracing.phoenix import Phoenix, screenshot

pytestmark = pytest.mark.slow


class SentTrace(NamedTuple):
    """The OpenTelemetry ids of a parent span and its child, in hex as Phoenix returns them."""

    trace_id: str
    parent_span_id: str
    child_span_id: str


def send_parent_and_child(exporter: SpanExporter, project: str) -> SentTrace:
    """An ``agent run`` span with a ``chat model`` child, exported to ``project`` as each ends."""
    provider = TracerProvider(resource=Resource.create({"openinference.project.name": project}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.tracing")
    try:
        # The child starts inside the parent's context, and ends (is exported) first.
        with (
            tracer.start_as_current_span("agent run", attributes={"agent.name": "triage"}) as run,
            tracer.start_as_current_span(
                "chat model",
                attributes={"gen_ai.request.model": "test-model", "gen_ai.usage.input_tokens": 12},
            ) as chat,
        ):
            pass
    finally:
        provider.shutdown()
    return SentTrace(
        trace_id=format(run.get_span_context().trace_id, "032x"),
        parent_span_id=format(run.get_span_context().span_id, "016x"),
        child_span_id=format(chat.get_span_context().span_id, "016x"),
    )


def exporter_for(phoenix: Phoenix, transport: str) -> SpanExporter:
    if transport == "http":
        return HttpSpanExporter(endpoint=phoenix.otlp_http_endpoint)
    return GrpcSpanExporter(endpoint=phoenix.otlp_grpc_endpoint)


def by_name(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {span["name"]: span for span in spans}


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_a_parent_and_its_child_come_back_with_their_ids_and_attributes(
    phoenix: Phoenix, transport: str
) -> None:
    project = f"harness-{transport}"
    sent = send_parent_and_child(exporter_for(phoenix, transport), project)

    spans = by_name(phoenix.wait_for_spans(project, count=2))

    assert sorted(spans) == ["agent run", "chat model"]
    run, chat = spans["agent run"], spans["chat model"]
    assert run["context"] == {"trace_id": sent.trace_id, "span_id": sent.parent_span_id}
    assert chat["context"] == {"trace_id": sent.trace_id, "span_id": sent.child_span_id}
    assert run["parent_id"] is None
    assert chat["parent_id"] == sent.parent_span_id
    assert run["attributes"] == {"agent.name": "triage"}
    assert chat["attributes"]["gen_ai.usage.input_tokens"] == 12
    assert chat["attributes"]["gen_ai.request.model"] == "test-model"
    assert run["status_code"] == chat["status_code"] == "UNSET"


def test_spans_of_other_projects_are_not_listed_and_an_unknown_project_has_none(
    phoenix: Phoenix,
) -> None:
    send_parent_and_child(exporter_for(phoenix, "http"), "harness-mine")
    send_parent_and_child(exporter_for(phoenix, "http"), "harness-theirs")

    assert len(phoenix.wait_for_spans("harness-mine", count=2)) == 2
    assert phoenix.spans("harness-nobody") == []


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's header (its IHDR chunk comes first)."""
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", header[16:24])
    return width, height


def test_a_screenshot_of_the_trace_page_shows_its_spans(
    phoenix: Phoenix, chromium: str, tmp_path: Path
) -> None:
    sent = send_parent_and_child(exporter_for(phoenix, "http"), "harness-screenshot")
    phoenix.wait_for_spans("harness-screenshot", count=2)
    url = phoenix.trace_url("harness-screenshot", sent.trace_id)

    shot = screenshot(url, tmp_path / "trace.png", executable=chromium)

    assert png_size(shot) == (1600, 1000)
    assert shot.stat().st_size > 20_000  # a blank page of this size is a few KB
    dom = shot.with_suffix(".html").read_text()
    assert "Something went wrong" not in dom
    for shown in (sent.trace_id, sent.parent_span_id, "agent run", "chat model", "triage"):
        assert shown in dom
