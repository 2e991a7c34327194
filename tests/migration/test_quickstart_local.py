"""Agents written for Apache Flink Agents run unchanged on the local runner."""

import json

import pytest

from flink_agents.api.execution_environment import AgentsExecutionEnvironment
from flink_agents.testing.llm_server import Rule, ToolCallSpec
from tests.migration import review_agents as agents


@pytest.fixture
def stand_in(monkeypatch, llm_server):
    monkeypatch.setenv(agents.STAND_IN, llm_server.base_url.removesuffix("/v1"))
    return llm_server


def test_review_agent_with_connection_setup_prompt_and_tool(stand_in):
    stand_in.add_rule(
        Rule(
            after_tool="notify_shipping_manager",
            reply_text=json.dumps({"score": 2, "reasons": ["shipping"]}),
        )
    )
    stand_in.add_rule(
        Rule(
            last_user_contains="box arrived crushed",
            reply_tool_calls=[
                ToolCallSpec(
                    "notify_shipping_manager", {"id": "p1", "review": "box arrived crushed"}
                )
            ],
        )
    )
    stand_in.add_rule(Rule(reply_text='<think>fine</think>{"score": 5, "reasons": []}'))
    env = AgentsExecutionEnvironment.get_execution_environment()
    records = [
        {"key": "p1", "value": agents.Review(id="p1", review="box arrived crushed")},
        {"key": "p2", "value": agents.Review(id="p2", review="great sound")},
    ]
    outputs = env.from_list(records).apply(agents.ReviewAnalysisAgent()).to_list()
    assert outputs == []  # filled by execute
    env.execute()
    assert outputs == [
        {"p1": agents.ReviewScore(id="p1", score=2, reasons=["shipping"])},
        {"p2": agents.ReviewScore(id="p2", score=5, reasons=[])},
    ]
    first = next(c.request for c in stand_in.calls if "crushed" in json.dumps(c.request))
    assert first["model"] == "qwen3:8b"
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["messages"][1]["content"] == "review: box arrived crushed"
    assert [t["function"]["name"] for t in first["tools"]] == ["notify_shipping_manager"]


def test_memory_refs_sets_and_extra_event_fields():
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.get_config().set_int("step", 7)
    outputs = (
        env.from_list([{"key": "k", "value": v} for v in ("a", "b", "a")])
        .apply(agents.CounterAgent())
        .to_list()
    )
    env.execute()
    assert outputs == [
        {"k": (1, "extra fields are kept", 7)},
        {"k": (2, "extra fields are kept", 7)},
        {"k": (2, "extra fields are kept", 7)},
    ]


def test_react_agent_as_their_quickstart_builds_it(stand_in):
    from flink_agents.api.resource import ResourceType
    from flink_agents.api.tools.tool import Tool

    stand_in.add_rule(
        Rule(
            after_tool="notify_shipping_manager",
            reply_json={"id": "p1", "score": 1, "reasons": ["shipping"]},
        )
    )
    stand_in.add_rule(
        Rule(
            last_user_contains="crushed",
            reply_tool_calls=[
                ToolCallSpec("notify_shipping_manager", {"id": "p1", "review": "crushed"})
            ],
        )
    )
    stand_in.add_rule(Rule(reply_json={"id": "p2", "score": 5, "reasons": []}))
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.add_resource(
        "stand_in", ResourceType.CHAT_MODEL_CONNECTION, agents.ollama_connection()
    ).add_resource(
        "notify_shipping_manager",
        ResourceType.TOOL,
        Tool.from_callable(agents.notify_shipping_manager),
    )
    records = [
        {"key": "p1", "value": agents.Review(id="p1", review="box crushed")},
        {"key": "p2", "value": agents.Review(id="p2", review="great")},
    ]
    outputs = env.from_list(records).apply(agents.react_agent()).to_list()
    env.execute()
    assert outputs == [
        {"p1": agents.ReviewScore(id="p1", score=1, reasons=["shipping"])},
        {"p2": agents.ReviewScore(id="p2", score=5, reasons=[])},
    ]
    first = next(c.request for c in stand_in.calls if "crushed" in json.dumps(c.request))
    assert first["messages"][-1] == {"role": "user", "content": '"id": p1, "review": box crushed'}
    assert [t["function"]["name"] for t in first["tools"]] == ["notify_shipping_manager"]
