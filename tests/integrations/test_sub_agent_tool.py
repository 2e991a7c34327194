"""A sub-agent offered to ReActAgent as a tool: the model calls it, it runs for the key,
and its output is the tool result (the parity suite runs sub-agents on MiniCluster)."""

from __future__ import annotations

import pytest

from flink_agents.agents import ReActAgent
from flink_agents.api import SubAgent
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.runtime import LocalRunner
from flink_agents.testing.llm_server import Rule, ToolCallSpec
from tests.runtime.sub_agent_agents import CALLS, Researcher


@pytest.fixture
def scripted(monkeypatch, llm_server):
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-sub-agent-test")
    llm_server.add_rule(Rule(after_tool="researcher", reply_text="In short: {tool_result}"))
    llm_server.add_rule(
        Rule(
            last_user_contains="tides",
            reply_tool_calls=[ToolCallSpec("researcher", {"input": "tides"})],
        )
    )
    CALLS.clear()
    return llm_server


def coordinator() -> ReActAgent:
    model = OpenAIChatModel("scripted", retry_initial_wait=0.01, max_retries=1)
    researcher = SubAgent(Researcher, description="Looks a topic up in the library")
    return ReActAgent(chat_model=model, tools={"researcher": researcher})


def test_react_agent_calls_a_sub_agent_as_a_tool(scripted):
    runner = LocalRunner(coordinator())
    assert runner.run("k", "What about tides?") == [
        'In short: {"answer": "facts about tides", "asked": 1}'
    ]
    first, second = (call.request for call in scripted.calls)
    [tool] = first["tools"]
    assert tool["function"]["name"] == "researcher"
    assert tool["function"]["description"] == "Looks a topic up in the library"
    assert tool["function"]["parameters"]["required"] == ["input"]
    assert second["messages"][-1]["role"] == "tool"
    assert CALLS["tides"] == 1
    # The researcher's memory is its own, kept for the key across calls.
    assert runner.run("k", "And tides again?")[0].endswith('"asked": 2}')
