"""Traces of runs on the local runner, exported over OTLP to a real receiver
(``otlp_receiver.py``): the tree of a ReAct run with a tool and a sub-agent, its GenAI
attributes and token counts, content only when asked, a run restored after a crash, a
collector that is slow or absent, and tracing off. MiniCluster runs the same agent in
``tests/runtime/flink/test_tracing_flink.py``; Arize Phoenix reads it in
``tests/tracing/test_phoenix.py``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from flink_agents.api import FlinkAgentsError
from flink_agents.runtime import AgentOptions, LocalRunner
from flink_agents.runtime._event_log import Redactor
from flink_agents.runtime._tracing import Tracer
from flink_agents.runtime.action_log import InMemoryActionLog
from flink_agents.runtime.journal import ActionJournal
from flink_agents.testing.llm_server import ScriptedLLMServer
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
from tests.tracing.trace_agents import CRASH_DIR_ENV, Crash, script, trip_planner

pytest.importorskip("opentelemetry.sdk", reason="tracing needs the otel extra")
from tests.tracing.otlp_receiver import OtlpReceiver

SECRET = "sk-trace-test-4471-very-secret"


@pytest.fixture
def stand_in(monkeypatch):
    with ScriptedLLMServer() as server:
        script(server)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        yield server


@pytest.fixture
def receiver():
    with OtlpReceiver() as receiver:
        yield receiver


def traced(receiver: OtlpReceiver, protocol: str = "http/protobuf", **options) -> AgentOptions:
    endpoint = receiver.grpc_endpoint if protocol == "grpc" else receiver.http_endpoint
    return AgentOptions(
        tracing="otlp", tracing_endpoint=endpoint, tracing_protocol=protocol, **options
    )


def exported(receiver: OtlpReceiver, runner: LocalRunner) -> list[dict]:
    """Every span the runner exported, once it closed (which flushes its exporter)."""
    runner.close()
    return [normal(span) for span in receiver.spans()]


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_each_run_is_a_trace_of_its_actions_calls_and_sub_agent(stand_in, receiver, protocol):
    runner = LocalRunner(trip_planner(), options=traced(receiver, protocol))
    assert runner.run("ann", "Paris please") == ["Plan: sunny in Paris"]
    assert runner.run("bob", "Lisbon please") == ["Plan: sunny in Lisbon"]
    spans = exported(receiver, runner)

    traces = by_trace(spans)
    assert len(traces) == 2  # one per run
    keys = set()
    for trace in traces.values():
        assert tree(trace) == PLANNED, [c.request["messages"][-2:] for c in stand_in.calls]
        assert orphans(trace) == []
        root = root_of(trace)["attributes"]
        assert root["gen_ai.operation.name"] == "invoke_agent"
        assert root["gen_ai.agent.name"] == "trip_planner"
        assert root["flink_agents.run.outcome"] == "succeeded"
        assert root["flink_agents.run.sequence"] == 1
        keys.add(json.loads(root["flink_agents.key"]))
    assert keys == {"ann", "bob"}
    chats = [s["attributes"] for s in spans if s["name"] == "chat scripted"]
    assert len(chats) == 4
    for chat in chats:
        assert chat["gen_ai.request.model"] == "scripted"
        assert chat["gen_ai.provider.name"] == "openai"
        assert chat["gen_ai.response.finish_reasons"] in (["tool_calls"], ["stop"])
        assert "gen_ai.input.messages" not in chat  # content is opt-in
    assert usage(spans) == served_usage(stand_in)
    [tool] = {s["attributes"]["gen_ai.tool.name"] for s in spans if "execute_tool" in s["name"]}
    assert tool == "weather"
    raw = json.dumps(receiver.spans())
    assert SECRET not in raw
    resource = receiver.spans()[0]["resource"]
    assert resource["service.name"] == "trip_planner"


def test_prompts_and_completions_only_with_tracing_content_and_redacted(stand_in, receiver):
    runner = LocalRunner(trip_planner(), options=traced(receiver, tracing_content=True))
    # A user who pastes a secret into a prompt: the spans hide it, as the event log does.
    runner.run("ann", f"Paris please, my key is {SECRET}")
    spans = exported(receiver, runner)

    [first, second] = [s["attributes"] for s in spans if s["name"] == "chat scripted"]
    assert "Paris please" in first["gen_ai.input.messages"]
    assert "***" in first["gen_ai.input.messages"]
    assert "guide" in first["gen_ai.output.messages"]  # it asked for the tools
    assert "Plan: sunny in Paris" in second["gen_ai.output.messages"]
    [tool] = [s["attributes"] for s in spans if s["name"] == "execute_tool weather"]
    assert json.loads(tool["gen_ai.tool.call.arguments"]) == {"city": "Paris"}
    assert tool["gen_ai.tool.call.result"] == "sunny in Paris"
    assert SECRET not in json.dumps(receiver.spans())


def test_content_is_cut_to_the_payload_limit(stand_in, receiver):
    options = traced(receiver, tracing_content=True, event_log_max_payload_chars=40)
    runner = LocalRunner(trip_planner(), options=options)
    runner.run("ann", "Paris " + "please " * 50)
    spans = exported(receiver, runner)
    for span in spans:
        for name in ("gen_ai.input.messages", "input.value"):
            value = span["attributes"].get(name)
            assert value is None or len(value) < 40 + 40  # the cut, and its note


def test_a_run_restored_after_a_crash_is_one_trace_with_its_replays_marked(
    stand_in, receiver, tmp_path, monkeypatch
):
    monkeypatch.setenv(CRASH_DIR_ENV, str(tmp_path))
    log = InMemoryActionLog()
    options = traced(receiver)
    first = LocalRunner(trip_planner(), journal=ActionJournal(log, "job"), options=options)
    checkpoint = first.snapshot()
    with pytest.raises(Crash):  # the guide's second action dies, its first recorded
        first.run("cat", "Crashville please")
    first.engine.journal.flush()
    first.close()
    second = LocalRunner(trip_planner(), journal=ActionJournal(log, "job"), options=options)
    second.restore(checkpoint)
    assert second.run("cat", "Crashville please") == ["Plan: sunny in Crashville"]
    spans = exported(receiver, second)

    [trace] = by_trace(spans).values()  # both executions, one trace
    assert orphans(trace) == []
    root = root_of(trace)  # exported once, by the execution that ended the run
    assert root["attributes"]["flink_agents.run.outcome"] == "succeeded"
    replayed = sorted(s["name"] for s in trace if s["attributes"].get("flink_agents.replayed"))
    # The first model call's action and the guide's first action come from the log.
    assert replayed == ["action chat_model_action", "action look"]
    # What the crash cut short exported nothing: the restore's execution has its span, and
    # what finished inside it before the crash (the guide's first action) sits under it.
    assert [s["name"] for s in trace if s["error"]] == []
    assert len({s["span_id"] for s in trace if s["name"] == "action tool_call_action"}) == 1
    # Every model call made is traced once, with the tokens the stand-in counted.
    assert len([s for s in trace if s["name"] == "chat scripted"]) == 2
    assert usage(trace) == served_usage(stand_in)
    assert stand_in.call_count("chat") == 2


def test_a_collector_that_is_down_costs_dropped_spans_not_a_stalled_run(stand_in):
    # Nothing listens there: every export fails; the queue holds 4 spans at most.
    with OtlpReceiver(refuse=True) as refusing:
        options = traced(refusing, tracing_max_queue=4)
        runner = LocalRunner(trip_planner(), options=options)
        outputs = [runner.run(f"k{n}", "Paris please")[0] for n in range(5)]
        assert outputs == ["Plan: sunny in Paris"] * 5
        metrics = runner.engine.metrics.snapshot()
        runner.close()
        assert refusing.spans() == []
    assert metrics["tracing.numOfSpans"] == 5 * 13
    assert metrics["tracing.numOfSpansDropped"] > 0


def test_the_trace_of_a_run_is_named_by_the_job_key_and_sequence():
    spans: list = []
    one = Tracer(spans.append, job="job-1", agent="a")
    again = Tracer(spans.append, job="job-1", agent="a")
    assert one.trace_id("k", 3) == again.trace_id("k", 3)  # another attempt, another process
    assert one.run_span_id("k", 3) == again.run_span_id("k", 3)
    assert len({one.trace_id("k", 3), one.trace_id("k", 4), one.trace_id("j", 3)}) == 3
    assert Tracer(spans.append, job="job-2", agent="a").trace_id("k", 3) != one.trace_id("k", 3)


def test_tracing_off_loads_no_sdk_and_builds_no_tracer():
    code = (
        "import sys\n"
        "from flink_agents.runtime import LocalRunner\n"
        "from tests.runtime.sub_agent_agents import Researcher\n"
        "runner = LocalRunner(Researcher)\n"
        "runner.run('k', 'tides')\n"
        "print(runner.engine.tracer, 'opentelemetry.sdk' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split()[-2:] == ["None", "False"]


def test_tracing_without_the_otel_extra_is_a_clear_error(stand_in, monkeypatch):
    for name in [name for name in sys.modules if name.startswith("opentelemetry.sdk")]:
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk", None)
    monkeypatch.delitem(sys.modules, "flink_agents.runtime._otlp", raising=False)
    with pytest.raises(FlinkAgentsError, match=r"pip install 'pyflink-agents\[otel\]'"):
        LocalRunner(trip_planner(), options=AgentOptions(tracing="otlp"))


def test_the_root_of_a_restored_run_counts_what_was_replayed(stand_in, receiver, tmp_path):
    log = InMemoryActionLog()
    options = traced(receiver)
    first = LocalRunner(trip_planner(), journal=ActionJournal(log, "job"), options=options)
    checkpoint = first.snapshot()
    first.run("dan", "Lisbon please")
    first.close()
    again = LocalRunner(trip_planner(), journal=ActionJournal(log, "job"), options=options)
    again.restore(checkpoint)  # the run ended after the checkpoint: the restore replays it
    assert again.run("dan", "Lisbon please") == ["Plan: sunny in Lisbon"]
    spans = exported(receiver, again)

    roots = [s for s in spans if s["parent_id"] is None]
    assert len({s["span_id"] for s in roots}) == 1  # delivered twice, one span
    # Replayed: both model calls' actions and the tool action (the guide within it).
    assert [r["attributes"].get("flink_agents.run.replayed_actions") for r in roots] == [None, 3]
    assert stand_in.call_count("chat") == 2  # nothing asked twice


def test_an_error_is_redacted_before_it_is_cut():
    spans: list = []
    tracer = Tracer(
        spans.append,
        job="j",
        agent="a",
        max_payload_chars=40,
        redactor=Redactor([SECRET]),
    )
    # The cut at 40 characters falls inside the secret.
    error = PermissionError(f"refused key {SECRET} by the server")
    tracer.action_finished("k", 1, 1, "act", 0, 7, 8, 0, error=error)
    [span] = spans
    assert span.error.startswith("PermissionError: refused key *** by the")
    assert SECRET[:8] not in repr(span)
