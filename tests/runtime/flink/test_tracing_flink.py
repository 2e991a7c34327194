"""Traces of runs on MiniCluster, in both execution modes, with a run killed mid-way and the
job restored from its checkpoint (``trace_job.py``): each run is one trace under one root,
its tree that of the local runner, what the restore answered from the action log marked
replayed, every model call traced once with the stand-in's token counts, nothing secret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flink_agents.runtime.flink import read_json_files
from flink_agents.testing.llm_server import ScriptedLLMServer
from tests.children import run_child_job
from tests.runtime.flink.runners import MODES
from tests.tracing.span_tree import (
    PLANNED,
    by_trace,
    normal,
    orphans,
    paths,
    served_usage,
    usage,
)
from tests.tracing.trace_agents import CRASH_DIR_ENV, script

pytest.importorskip("opentelemetry.sdk", reason="tracing needs the otel extra")
from tests.tracing.otlp_receiver import OtlpReceiver

pytestmark = [pytest.mark.slow, pytest.mark.flink]

SECRET = "sk-trace-flink-5512-very-secret"
RECORDS = [
    {"k": "ann", "text": "Paris please"},
    {"k": "bob", "text": "Lisbon please"},
    {"k": "cat", "text": "Crashville please"},
]
THEN = [{"k": key, "text": "Paris please"} for key in ("ann", "bob", "cat")]
"""After the kill, a record of each key: in process mode a run restored parked (the killed
one, and those waiting for a model when the checkpoint was taken) resumes at its key's next
record (docs/consistency.md, "What is not guaranteed")."""


@pytest.mark.parametrize(
    ("mode", "protocol"), list(zip(MODES, ("http/protobuf", "grpc"), strict=True))
)
def test_runs_are_traced_across_a_failure_and_a_restore(mode, protocol, tmp_path, monkeypatch):
    with ScriptedLLMServer() as server, OtlpReceiver() as receiver:
        script(server)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        monkeypatch.setenv(CRASH_DIR_ENV, str(tmp_path))
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")  # export within 100 ms
        if mode == "process":
            monkeypatch.setenv("_python_worker_execution_mode", "process")
        (tmp_path / "input").mkdir()
        spec = {
            "mode": mode,
            "protocol": protocol,
            "endpoint": receiver.grpc_endpoint if protocol == "grpc" else receiver.http_endpoint,
            "input_dir": str(tmp_path / "input"),
            "output_dir": str(tmp_path / "out"),
            "data_dir": str(tmp_path / "data"),
            "records": RECORDS,
            "then": THEN,
        }
        spec_file = tmp_path / "spec.json"
        spec_file.write_text(json.dumps(spec))
        run_child_job("tests.runtime.flink.trace_job", spec_file, f"the tracing job ({mode})")

        def roots() -> int:
            return len({s["trace_id"] for s in receiver.spans() if s["parent_span_id"] is None})

        assert receiver.wait_for(lambda: roots() >= len(RECORDS) + len(THEN), timeout=30)
        raw = receiver.spans()

    assert (tmp_path / "crashed").exists()  # the run was killed once
    assert sorted(read_json_files(Path(spec["output_dir"]))) == [
        "Plan: sunny in Crashville",
        "Plan: sunny in Lisbon",
        *["Plan: sunny in Paris"] * 4,
    ]
    spans = [normal(span) for span in raw]
    traces = by_trace(spans)
    assert len(traces) == len(RECORDS) + len(THEN)  # one per run, whichever execution made it
    for trace in traces.values():
        # One root: a run the restore ran again ends under the same one (a run that had
        # ended before the failure may deliver it twice, as an OTLP retry would).
        assert len({s["span_id"] for s in trace if s["parent_id"] is None}) == 1
        assert orphans(trace) == []
        assert paths(trace) == paths(PLANNED)
    runs = {
        (
            json.loads(s["attributes"]["flink_agents.key"]),
            s["attributes"]["flink_agents.run.sequence"],
        ): trace
        for trace in traces.values()
        for s in trace
        if s["parent_id"] is None
    }
    crashed = runs["cat", 1]
    replayed = {s["name"] for s in crashed if s["attributes"].get("flink_agents.replayed")}
    # The guide's first action, recorded before the kill, is answered from the log (the
    # first model call's action too, unless a checkpoint came between it and the kill).
    assert "action look" in replayed
    # What the kill cut short exported nothing of itself: the restore's execution did.
    assert [s["name"] for s in crashed if s["error"]] == []
    # Every model call made is traced once (a replay counts none), with the stand-in's usage.
    chats = [s for s in spans if s["name"] == "chat scripted"]
    ran = [s for s in chats if not s["attributes"]["flink_agents.replayed"]]
    assert len(ran) == server.call_count("chat")
    assert usage(spans) == served_usage(server)
    assert SECRET not in json.dumps(raw)
