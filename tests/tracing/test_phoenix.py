"""Arize Phoenix, a real trace viewer, as the receiver of an agent's traces: ``trip_planner``
(a ReAct loop with a tool and a sub-agent, ``trace_agents.py``) runs on MiniCluster with
``tracing: otlp`` pointed at Phoenix on loopback, and the traces are read back through
Phoenix's REST API: one trace per run, the tree of the local runner, the stand-in's token
counts, nothing secret. Chromium then takes the screenshot of a run's trace that
``docs/tracing.md`` shows (``FLINK_AGENTS_UPDATE_SCREENSHOT=1`` copies it there)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk", reason="tracing needs the otel extra")

from flink_agents.runtime.flink import read_json_files
from flink_agents.testing.llm_server import ScriptedLLMServer
from tests.children import run_child_job
from tests.tracing.phoenix import screenshot
from tests.tracing.span_tree import (
    PLANNED,
    by_trace,
    normal,
    orphans,
    root_of,
    served_usage,
    tree,
    usage,
)
from tests.tracing.trace_agents import script

pytestmark = [pytest.mark.slow, pytest.mark.flink]

SECRET = "sk-phoenix-test-8834-very-secret"
PROJECT = "trip-planner"
RECORDS = [{"k": "ann", "text": "Paris please"}, {"k": "bob", "text": "Lisbon please"}]
DOCS_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "images" / "phoenix-trace.png"


def test_phoenix_shows_each_run_as_a_trace_of_its_actions_and_calls(
    phoenix, chromium, tmp_path, monkeypatch
):
    with ScriptedLLMServer() as server:
        script(server)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={PROJECT}")
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
        (tmp_path / "input").mkdir()
        spec = {
            "mode": "thread",
            "protocol": "http/protobuf",
            "endpoint": phoenix.url,  # /v1/traces is added, as to OTEL_EXPORTER_OTLP_ENDPOINT
            "input_dir": str(tmp_path / "input"),
            "output_dir": str(tmp_path / "out"),
            "data_dir": str(tmp_path / "data"),
            "records": RECORDS,
            "then": [],
        }
        spec_file = tmp_path / "spec.json"
        spec_file.write_text(json.dumps(spec))
        run_child_job("tests.runtime.flink.trace_job", spec_file, "the job traced to Phoenix")
        assert sorted(read_json_files(Path(spec["output_dir"]))) == [
            "Plan: sunny in Lisbon",
            "Plan: sunny in Paris",
        ]
        per_run = 13  # the spans of one run of trip_planner (PLANNED)
        raw = phoenix.wait_for_spans(PROJECT, per_run * len(RECORDS), timeout=60)

    spans = [normal(span) for span in raw]
    traces = by_trace(spans)
    assert len(traces) == len(RECORDS)
    for trace in traces.values():
        assert tree(trace) == PLANNED
        assert orphans(trace) == []
    assert usage(spans) == served_usage(server)
    assert SECRET not in json.dumps(raw)
    # Phoenix reads the conventions: a model call is an LLM span with its model and tokens.
    [chat] = [s for s in raw if s["name"] == "chat scripted"][:1]
    assert chat["span_kind"] == "LLM"
    assert normal(chat)["attributes"]["llm.token_count.prompt"] > 0

    trace_id, trace = next(iter(traces.items()))
    page = screenshot(phoenix.trace_url(PROJECT, trace_id), tmp_path / "trace.png")
    shown = page.with_suffix(".html").read_text()
    assert trace_id in shown
    for name in ("invoke_agent trip_planner", "invoke_agent guide", "execute_tool weather"):
        assert name in shown
    assert "Something went wrong" not in shown
    assert page.stat().st_size > 20_000
    assert root_of(trace)["name"] == "invoke_agent trip_planner"
    if os.environ.get("FLINK_AGENTS_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(page, DOCS_SCREENSHOT)
