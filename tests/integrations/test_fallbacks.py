"""Chat model fallbacks and routes: who answers a request, and that a restored run asks the
same models again, getting their recorded answers."""

import pytest

from flink_agents.api import ActionExecutionError, FlinkAgentsError, SizeRoute
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.runtime import LocalExecutionEnvironment, LocalRunner
from flink_agents.runtime.action_log import InMemoryActionLog
from flink_agents.runtime.journal import ActionJournal
from flink_agents.testing.llm_server import Rule
from tests.integrations.spend_agents import ROUTED, Asks, long_goes_big

SECRET = "sk-fallbacks-1357"


@pytest.fixture
def scripted(monkeypatch, llm_server):
    monkeypatch.setenv("TEST_LLM_URL", llm_server.base_url)
    monkeypatch.setenv("TEST_LLM_KEY", SECRET)
    for name in ("primary", "backup", "last", "big", "sized"):
        llm_server.add_rule(Rule(model=name, reply_text=f"{name} says hi"))
    return llm_server


def asked(server) -> list[tuple[str, int]]:
    return [(call.request["model"], call.status) for call in server.calls]


def test_a_healthy_model_answers_itself(scripted):
    assert LocalRunner(Asks).run("k", {"text": "hello"}) == [
        {"by": "primary", "text": "primary says hi"}
    ]


def test_a_failed_model_hands_the_request_to_its_fallbacks_in_order(scripted):
    scripted.fail_next(2, status=503)  # primary, then backup
    runner = LocalRunner(Asks)
    assert runner.run("k", {"text": "hello"}) == [{"by": "last", "text": "last says hi"}]
    assert asked(scripted) == [("primary", 503), ("backup", 503), ("last", 200)]
    metrics = runner.metrics.snapshot()
    assert metrics["model.primary.numOfFallbacks"] == 1
    assert metrics["model.backup.numOfFallbacks"] == 1
    assert metrics["model.last.numOfRequests"] == 1


def test_rate_limits_and_refusals_fall_back_too(scripted):
    scripted.fail_next(1, status=429, retry_after=0)
    scripted.fail_next(1, status=400)
    assert LocalRunner(Asks).run("k", {"text": "hello"}) == [{"by": "last", "text": "last says hi"}]


def test_when_every_model_fails_the_run_fails_with_the_last_error(scripted):
    scripted.fail_next(3, status=500)
    env = LocalExecutionEnvironment(error_policy="error-output")
    builder = env.from_list([{"k": "a", "text": "hello"}], "k").apply(Asks)
    assert builder.to_list() == []
    [error] = builder.error_stream()
    assert error["error"].startswith("ChatModelError: chat model 'last'")
    assert SECRET not in str(error)


def test_a_restored_run_replays_the_fallbacks_answer_and_asks_no_model_again(scripted):
    log = InMemoryActionLog()
    first = LocalRunner(Asks, journal=ActionJournal(log, "job"))
    checkpoint = first.snapshot()  # before the record: Flink reads it again after a restore
    scripted.fail_next(1, status=503)
    assert first.run("k", {"text": "hello"}) == [{"by": "backup", "text": "backup says hi"}]
    calls = len(scripted.calls)
    # The job fails before its next checkpoint; the primary is healthy again by now.
    second = LocalRunner(Asks, journal=ActionJournal(log, "job"))
    second.restore(checkpoint)
    assert second.run("k", {"text": "hello"}) == [{"by": "backup", "text": "backup says hi"}]
    assert len(scripted.calls) == calls


def test_a_route_picks_the_model_and_a_restored_run_replays_its_pick(scripted):
    log = InMemoryActionLog()
    first = LocalRunner(Asks, journal=ActionJournal(log, "job"))
    long_text = "tell me everything " * 10
    assert first.run("k", {"text": "short"}) == [{"by": "primary", "text": "primary says hi"}]
    checkpoint = first.snapshot()
    routed = ROUTED.copy()
    assert first.run("k", {"text": long_text}) == [{"by": "big", "text": "big says hi"}]
    assert [model for model, _ in asked(scripted)] == ["primary", "big"]
    assert [*routed, long_text] == ROUTED
    second = LocalRunner(Asks, journal=ActionJournal(log, "job"))
    second.restore(checkpoint)
    assert second.run("k", {"text": long_text}) == [{"by": "big", "text": "big says hi"}]
    assert [*routed, long_text] == ROUTED  # the route was not asked again
    assert len(scripted.calls) == 2


def test_a_size_route_sends_long_requests_elsewhere(scripted):
    runner = LocalRunner(Asks)
    short, long = {"text": "hi", "model": "sized"}, {"text": "x" * 100, "model": "sized"}
    assert runner.run("k", short) == [{"by": "sized", "text": "sized says hi"}]
    assert runner.run("k", long) == [{"by": "big", "text": "big says hi"}]
    model = OpenAIChatModel(
        "m",
        base_url=scripted.base_url,
        api_key_env="TEST_LLM_KEY",
        route=SizeRoute(over_tokens=5, to="big"),
    )
    assert model.descriptor().args["route"] == {"over_tokens": 5, "to": "big"}


def test_a_route_to_something_that_is_no_chat_model_fails_clearly(scripted):
    with pytest.raises(ActionExecutionError) as caught:
        LocalRunner(Asks).run("k", {"text": "hi", "model": "lost"})
    assert isinstance(caught.value.cause, FlinkAgentsError)
    assert "nonexistent" in str(caught.value.cause)


def test_fallbacks_and_the_route_are_written_into_plans(scripted):
    model = OpenAIChatModel(
        "primary",
        base_url=scripted.base_url,
        api_key_env="TEST_LLM_KEY",
        fallbacks=["backup"],
        route=long_goes_big,
    )
    args = model.descriptor().args
    assert args["fallbacks"] == ["backup"]
    assert args["route"] == "tests.integrations.spend_agents:long_goes_big"
    again = OpenAIChatModel(**{**args, "api_key_env": "TEST_LLM_KEY"})
    assert again.route is long_goes_big and again.fallbacks == ("backup",)
