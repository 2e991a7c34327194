"""Agents of Apache Flink Agents 0.3's string-typed event API, with skills, on the local
runner: routed by type string, their events surviving pickling, the model seeing the
skills' summary and reading one through durable tool calls."""

import pickle

import pytest

from flink_agents.api.events.event import Event, InputEvent, typed_event_class
from flink_agents.api.execution_environment import AgentsExecutionEnvironment
from flink_agents.testing.llm_server import Rule, ToolCallSpec
from tests.migration import typed_agents as agents

SECRET = "sk-migration-typed-5150"


def test_an_event_of_a_type_string_is_routed_by_it_and_pickles_as_itself():
    event = Event(type="Done", attributes={"n": 1})
    assert type(event) is typed_event_class("Done")
    assert event.get_type() == "Done" and event.get_attr("n") == 1
    again = pickle.loads(pickle.dumps(event))
    assert type(again) is type(event) and again == event
    assert typed_event_class(InputEvent.EVENT_TYPE) is InputEvent
    with pytest.raises(TypeError):
        InputEvent.from_event(event)


def test_typed_actions_and_skills_through_a_setup(monkeypatch, llm_server):
    monkeypatch.setenv(agents.STAND_IN, llm_server.base_url.removesuffix("/v1"))
    monkeypatch.setenv("MIGRATION_API_KEY", SECRET)
    llm_server.add_rule(Rule(after_tool="read_skill_file", reply_text="12 inches"))
    llm_server.add_rule(
        Rule(
            after_tool="load_skill",
            reply_tool_calls=[
                ToolCallSpec(
                    "read_skill_file", {"name": "unit-converter", "path": "references/factors.md"}
                )
            ],
        )
    )
    llm_server.add_rule(
        Rule(reply_tool_calls=[ToolCallSpec("load_skill", {"name": "unit-converter"})])
    )
    env = AgentsExecutionEnvironment.get_execution_environment()
    outputs = (
        env.from_list([{"key": "q", "value": "1 foot in inches?"}])
        .apply(agents.TypedAgent())
        .to_list()
    )
    env.execute()
    assert outputs == [{"q": "12 inches"}]
    first = llm_server.calls[0].request
    system = "\n".join(m["content"] for m in first["messages"] if m["role"] == "system")
    assert "unit-converter" in system and "haiku-writer" in system  # names and descriptions
    assert "Find the factor" not in str(first)  # the body only once the model loads it
    assert "Find the factor" in str(llm_server.calls[1].request)
    assert {t["function"]["name"] for t in first["tools"]} == {"load_skill", "read_skill_file"}


def test_their_0_3_names_on_our_built_in_events():
    import json

    from pyflink.common import Row

    from flink_agents.api.events.event import OutputEvent

    made = Event(type=InputEvent.EVENT_TYPE, attributes={"input": "data"})
    assert type(made) is InputEvent and made.input == "data"
    assert InputEvent.from_event(made).type == "_input_event"
    assert OutputEvent(output=1).get_type() == "_output_event"
    parsed = Event.from_json(
        json.dumps(
            {"type": "Seen", "attributes": {"row": {"type": "Row", "values": [7], "fields": ["n"]}}}
        )
    )
    assert parsed.get_type() == "Seen" and parsed.get_attr("row") == Row(n=7)
    with pytest.raises(ValueError, match="type"):
        Event.from_json(json.dumps({"attributes": {}}))
    shown = json.loads(InputEvent(input={"r": Row(a=1)}).model_dump_json())
    assert shown["input"]["r"] == {"type": "Row", "values": [1], "fields": ["a"]}


def test_an_event_of_a_type_string_unpickles_in_a_fresh_process():
    """As a restored job reads it from Flink state or the action log: the class made for its
    string is made again from its name."""
    import subprocess
    import sys

    payload = pickle.dumps(Event(type="Restored", attributes={"n": 2}))
    code = (
        "import pickle, sys; e = pickle.loads(sys.stdin.buffer.read()); "
        "print(type(e).__name__, e.get_type(), e.get_attr('n'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=payload, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().split() == [
        "TypedEvent_" + b"Restored".hex(),
        "Restored",
        "2",
    ]


def test_a_run_of_typed_events_restored_replays_its_model_call(monkeypatch, llm_server, tmp_path):
    from flink_agents.api import ActionExecutionError
    from flink_agents.runtime import LocalRunner
    from flink_agents.runtime.action_log.sqlite import SqliteActionLog
    from flink_agents.runtime.journal import ActionJournal

    monkeypatch.setenv(agents.STAND_IN, llm_server.base_url.removesuffix("/v1"))
    llm_server.add_rule(Rule(reply_text="twelve"))
    with SqliteActionLog(tmp_path / "log.db") as log:
        log.setup()
        first = LocalRunner(agents.RestoredAgent(), journal=ActionJournal(log, "job"))
        checkpoint = first.snapshot()
        agents.CRASH_ONCE.add("q")
        with pytest.raises(ActionExecutionError, match="crashed after the model answered q"):
            first.run("q", "1 foot in inches?")
    with SqliteActionLog(tmp_path / "log.db") as log:  # the restarted job's
        second = LocalRunner(agents.RestoredAgent(), journal=ActionJournal(log, "job"))
        second.restore(checkpoint)
        assert second.run("q", "1 foot in inches?") == ["twelve"]
    assert len(llm_server.calls) == 1  # the recorded answer, not a second request
