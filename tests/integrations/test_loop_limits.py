"""Loop limits of the tool loop (``ChatRequestEvent``) and of ``ReActAgent``: model calls,
tokens and wall time per input, each ending the run with a clear error record."""

import pickle
from datetime import timedelta

import pytest

from flink_agents.agents import ReActAgent
from flink_agents.api import (
    ActionExecutionError,
    ChatRequestEvent,
    LoopLimitExceededError,
    MaxStepsExceededError,
)
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.plan import plan_from_yaml, save_plan
from flink_agents.runtime import LocalExecutionEnvironment, LocalRunner
from flink_agents.testing.llm_server import Rule, ToolCallSpec
from tests.integrations import chat_agents as agents

SECRET = "sk-loop-limits-4321"


@pytest.fixture
def looping(monkeypatch, llm_server):
    """A model that asks for ``add`` forever, unless the question is "easy"."""
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    llm_server.add_rule(Rule(last_user_contains="easy", reply_text="two"))
    llm_server.add_rule(Rule(reply_tool_calls=[ToolCallSpec("add", {"a": 1, "b": 1})]))
    return llm_server


def calculator(**limits) -> ReActAgent:
    model = OpenAIChatModel("scripted", retry_initial_wait=0.01, max_retries=0)
    return ReActAgent(chat_model=model, tools=[agents.add], **limits)


def failed(builder) -> list[dict]:
    return [e for e in builder.error_stream() if e["kind"] == "failed_run"]


def used_tokens(server) -> list[int]:
    return [call.response["usage"]["total_tokens"] for call in server.calls]


def test_the_token_limit_stops_the_loop_before_the_call_that_would_exceed_it(looping):
    env = LocalExecutionEnvironment(error_policy="error-output")
    builder = env.from_list(["loop forever", "easy one"]).apply(calculator(max_total_tokens=100))
    assert builder.to_list() == ["two"]  # the other input's run goes on
    [error] = failed(builder)
    assert error["input"] == "loop forever"
    assert error["error"].startswith("LoopLimitExceededError: chat request ")
    assert "(max_total_tokens=100) without a final answer" in error["error"]
    assert "still asks for tools: add" in error["error"]
    per_call = used_tokens(looping)[:-1]  # the last call is the easy input's
    assert sum(per_call) >= 100 > sum(per_call[:-1])  # stopped at the first call over it
    assert f"used {sum(per_call)} tokens in {len(per_call)} model calls" in error["error"]


def test_the_time_limit_counts_from_the_first_model_call(looping):
    looping.delay_next(count=10, seconds=0.2)
    with pytest.raises(ActionExecutionError) as caught:
        LocalRunner(calculator(max_time=timedelta(seconds=0.3))).run("k", "loop forever")
    cause = caught.value.cause
    assert isinstance(cause, LoopLimitExceededError)
    assert not isinstance(cause, MaxStepsExceededError)
    assert (cause.limit, cause.allowed) == ("time", 0.3)
    assert cause.used >= 0.3
    assert "(max_time=0.3s) without a final answer" in str(cause)
    assert looping.call_count("chat") <= 2  # each call takes 0.2 s


def test_the_step_limit_is_a_loop_limit_too(looping):
    with pytest.raises(ActionExecutionError) as caught:
        LocalRunner(calculator(max_steps=2)).run("k", "loop forever")
    cause = caught.value.cause
    assert isinstance(cause, MaxStepsExceededError) and isinstance(cause, LoopLimitExceededError)
    assert (cause.limit, cause.used, cause.allowed) == ("steps", 2, 2)
    assert looping.call_count("chat") == 2


def test_a_final_answer_is_kept_even_when_its_call_went_over_the_token_limit(looping):
    assert LocalRunner(calculator(max_total_tokens=1)).run("k", "easy") == ["two"]


def test_limit_errors_survive_pickling():
    error = LoopLimitExceededError("over", limit="tokens", used=120, allowed=100)
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.limit, copy.used, copy.allowed) == (
        LoopLimitExceededError,
        "over",
        "tokens",
        120,
        100,
    )
    steps = pickle.loads(pickle.dumps(MaxStepsExceededError("s", used=3, allowed=3)))
    assert (type(steps), steps.limit, steps.used) == (MaxStepsExceededError, "steps", 3)


def test_limits_go_through_a_plan_file(looping, tmp_path):
    agent = calculator(max_total_tokens=500, max_time=timedelta(minutes=2))
    path = tmp_path / "react.yaml"
    save_plan(agent.to_plan(), path)
    plan = plan_from_yaml(path.read_text())
    assert plan.config["react"]["max_total_tokens"] == 500
    assert plan.config["react"]["max_time"] == 120.0
    assert LocalRunner(plan).run("k", "easy") == ["two"]


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"max_total_tokens": 0}, "max_total_tokens must be at least 1"),
        ({"max_time": timedelta(0)}, "max_time must be a positive timedelta"),
        ({"max_time": 30}, "max_time must be a positive timedelta"),
    ],
)
def test_bad_limits_are_refused_where_they_are_given(looping, limits, message):
    with pytest.raises(ValueError, match=message):
        calculator(**limits)


def test_a_chat_request_refuses_a_time_limit_that_is_not_positive():
    with pytest.raises(ValueError, match="max_time must be positive"):
        ChatRequestEvent(model="m", messages=[], max_time=timedelta(seconds=-1))
