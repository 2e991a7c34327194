"""Budgets on the local runner: per key and per agent, by calls, tokens and cost, and what a
call over one does (fail, switch, wait); their totals across a restart and a restore."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from flink_agents.agents import ReActAgent
from flink_agents.api import (
    ActionExecutionError,
    Budget,
    BudgetExceededError,
    FlinkAgentsError,
    ModelPrice,
    TokenUsage,
)
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.plan import plan_from_yaml, save_plan, to_plan
from flink_agents.runtime import AgentOptions, LocalExecutionEnvironment, LocalRunner, load_options
from flink_agents.runtime.action_log import InMemoryActionLog
from flink_agents.runtime.action_log.sqlite import SqliteActionLog
from flink_agents.runtime.journal import ActionJournal
from flink_agents.testing.llm_server import Rule
from tests.integrations.spend_agents import Asks

SECRET = "sk-budgets-8642"
USAGE = {"prompt_tokens": 100, "completion_tokens": 50}
"""What every scripted answer reports: 150 tokens."""


@pytest.fixture
def scripted(monkeypatch, llm_server):
    monkeypatch.setenv("TEST_LLM_URL", llm_server.base_url)
    monkeypatch.setenv("TEST_LLM_KEY", SECRET)
    for name in ("primary", "backup", "last", "big"):
        llm_server.add_rule(Rule(model=name, reply_text=f"{name}: {{last_user}}", usage=USAGE))
    return llm_server


def run(records, **options):
    env = LocalExecutionEnvironment(error_policy="error-output", **options)
    builder = env.from_list(records, "k").apply(Asks)
    return builder.to_list(), builder.error_stream()


def asks(key: str, *texts: str) -> list[dict]:
    return [{"k": key, "text": text} for text in texts]


def hourly(**fields) -> Budget:
    return Budget(name=fields.pop("name", "hourly"), window="hour", **fields)


def test_a_key_budget_stops_each_key_at_its_limit(scripted):
    outputs, errors = run(asks("a", "1", "2", "3") + asks("b", "1"), budgets=[hourly(max_calls=2)])
    assert [o["text"] for o in outputs] == ["primary: 1", "primary: 2", "primary: 1"]
    [error] = errors
    assert (error["key"], error["input"]["text"]) == ("a", "3")
    assert error["error"].startswith("BudgetExceededError: a call of about ")
    assert "key budget 'hourly': spent 2 of 2 calls in its 3600s window" in error["error"]
    assert scripted.call_count("chat") == 3


def test_a_key_budgets_metrics_sum_its_keys(scripted):
    runner = LocalRunner(Asks, options=AgentOptions(budgets=[hourly(max_calls=1)]))
    runner.run("a", {"text": "1"})
    runner.run("b", {"text": "1"})
    with pytest.raises(ActionExecutionError):
        runner.run("a", {"text": "2"})
    snapshot = runner.metrics.snapshot()
    assert (snapshot["budget.hourly.spentCalls"], snapshot["budget.hourly.spentTokens"]) == (2, 300)
    assert snapshot["budget.hourly.numOfExceeded"] == 1


def test_a_key_budgets_totals_are_in_its_short_term_memory(scripted):
    runner = LocalRunner(Asks, options=AgentOptions(budgets=[hourly(max_tokens=10_000)]))
    runner.run("k", {"text": "hi"})
    runner.run("k", {"text": "again"})
    kept = runner.short_term_memory("k")["_flink_agents"]["spend"]["hourly"]
    assert (kept["tokens"], kept["calls"], kept["cost"]) == (300, 2, 0.0)
    assert kept["window_start_ms"] % 3_600_000 == 0


def test_tokens_are_checked_from_the_requests_size_and_charged_from_its_usage(scripted):
    # 150 tokens a call: after two (300), a third of a few tokens still fits under 320;
    # after three (450), none does.
    outputs, errors = run(asks("a", "1", "2", "3", "4"), budgets=[hourly(max_tokens=320)])
    assert len(outputs) == 3 and len(errors) == 1
    assert "spent 450 of 320 tokens" in errors[0]["error"]


def test_cost_comes_from_the_price_table(scripted):
    prices = {"primary": {"input": 1000.0, "cached_input": 100.0, "output": 2000.0}}
    runner = LocalRunner(
        Asks, options=AgentOptions(model_prices=prices, budgets=[hourly(max_cost=0.5)])
    )
    # 100 in, 50 out: 0.1 + 0.1 = 0.2 a call.
    assert runner.run("k", {"text": "one"})[0]["text"] == "primary: one"
    assert runner.run("k", {"text": "two"})[0]["text"] == "primary: two"
    assert runner.run("k", {"text": "three"})[0]["text"] == "primary: three"  # 0.4 + a bit
    with pytest.raises(ActionExecutionError) as caught:
        runner.run("k", {"text": "four"})
    assert isinstance(caught.value.cause, BudgetExceededError)
    assert caught.value.cause.budget == "hourly"
    assert runner.metrics.snapshot()["model.primary.costMicros"] == 600_000


def test_cached_input_tokens_cost_their_own_price():
    price = ModelPrice(input=1000, cached_input=100, output=2000)
    usage = TokenUsage(prompt_tokens=100, completion_tokens=50, total_tokens=150, cached_tokens=80)
    assert price.cost(usage) == pytest.approx((20 * 1000 + 80 * 100 + 50 * 2000) / 1e6)


def test_a_cost_limit_without_a_price_fails_clearly(scripted):
    _, [error] = run(asks("a", "1"), budgets=[hourly(max_cost=1.0)])
    assert "limits cost, and chat model 'primary' has no price" in error["error"]


def test_over_a_switching_budget_the_call_goes_to_the_cheaper_model(scripted):
    budget = hourly(max_calls=1, models=("primary",), on_exceeded="switch", switch_to="backup")
    outputs, errors = run(asks("a", "1", "2", "3"), budgets=[budget])
    assert errors == []
    assert [o["by"] for o in outputs] == ["primary", "backup", "backup"]
    assert [call.request["model"] for call in scripted.calls] == ["primary", "backup", "backup"]


def test_switching_in_a_circle_fails_clearly(scripted):
    budgets = [
        hourly(
            name="p", max_calls=1, models=("primary",), on_exceeded="switch", switch_to="backup"
        ),
        hourly(
            name="b", max_calls=1, models=("backup",), on_exceeded="switch", switch_to="primary"
        ),
    ]
    _, errors = run(asks("a", "1", "2", "3"), budgets=budgets)
    assert (
        "budgets switch chat models in a circle: primary -> backup -> primary" in errors[0]["error"]
    )


def test_over_a_waiting_budget_the_call_waits_for_the_next_window(scripted):
    window_s = 2.0
    # Start just after a window begins, so the first two calls fall in it.
    time.sleep(window_s - time.time() % window_s + 0.05)
    began = time.time()
    budget = Budget(
        name="burst", window=timedelta(seconds=window_s), max_calls=2, on_exceeded="wait"
    )
    outputs, errors = run(asks("a", "1", "2", "3", "4"), budgets=[budget])
    assert errors == []
    assert [o["text"] for o in outputs] == [f"primary: {n}" for n in "1234"]
    arrived = [call.at for call in scripted.calls]
    window_end = began - began % window_s + window_s
    assert arrived[1] < window_end <= arrived[2] <= arrived[3]


def test_a_call_larger_than_a_whole_window_fails_even_when_its_budget_waits(scripted):
    budget = hourly(max_tokens=3, on_exceeded="wait")
    _, [error] = run(asks("a", "a question longer than three tokens"), budgets=[budget])
    assert "(more than a whole window allows)" in error["error"]


def test_an_agent_budget_is_shared_by_keys_and_outlives_a_restart(scripted, tmp_path):
    """The agent's totals are in the action log's store: a new runner (a restarted job,
    a resubmitted one) on the same store goes on with the window's totals."""
    path = tmp_path / "log.db"
    options = AgentOptions(budgets=[hourly(name="shared", scope="agent", max_calls=3)])
    with SqliteActionLog(path) as log:
        log.setup()
        first = LocalRunner(Asks, options=options, journal=ActionJournal(log, "job-1"))
        assert first.run("a", {"text": "1"}) and first.run("b", {"text": "1"})
    with SqliteActionLog(path) as log:
        log.setup()
        second = LocalRunner(Asks, options=options, journal=ActionJournal(log, "job-2"))
        assert second.run("c", {"text": "1"})
        with pytest.raises(ActionExecutionError) as caught:
            second.run("a", {"text": "2"})
        assert "agent budget 'shared': spent 3 of 3 calls" in str(caught.value.cause)
        snapshot = second.metrics.snapshot()
        assert snapshot["budget.shared.numOfExceeded"] == 1
        assert snapshot["budget.shared.remainingCalls"] == 0
        assert snapshot["budget.shared.spentCalls"] == 1  # this runner's one
        assert snapshot["budget.shared.spentTokens"] == 150


def test_a_restored_run_replays_its_budgets_verdict_and_charges_once(scripted):
    log = InMemoryActionLog()
    options = AgentOptions(
        budgets=[hourly(max_calls=1, on_exceeded="switch", switch_to="backup", models=("primary",))]
    )
    first = LocalRunner(Asks, options=options, journal=ActionJournal(log, "job"))
    assert first.run("k", {"text": "1"})[0]["by"] == "primary"
    checkpoint = first.snapshot()
    assert first.run("k", {"text": "2"})[0]["by"] == "backup"
    calls = len(scripted.calls)
    second = LocalRunner(Asks, options=options, journal=ActionJournal(log, "job"))
    second.restore(checkpoint)
    assert second.run("k", {"text": "2"}) == [{"by": "backup", "text": "backup: 2"}]
    assert len(scripted.calls) == calls
    kept = second.short_term_memory("k")["_flink_agents"]["spend"]["hourly"]
    assert kept["calls"] == 1  # primary's one call: backup is not covered


def test_budgets_come_from_the_plan_and_from_config_yaml(scripted, tmp_path):
    (tmp_path / "config.yaml").write_text(
        "agent:\n"
        "  budgets:\n"
        "    - {name: daily, window: day, max_calls: 1}\n"
        "  model-prices:\n"
        "    primary: {input: 1.0, output: 2.0}\n"
    )
    options = load_options(conf_dir=str(tmp_path))
    assert options.budgets[0].window == timedelta(days=1)
    assert options.model_prices["primary"].output == 2.0
    plan = to_plan(Asks)
    data = plan.model_dump(mode="json")
    data["config"]["budgets"] = [{"name": "daily", "window": 3600, "max_calls": 5}]
    planned = type(plan).model_validate(data)
    runner = LocalRunner(planned, options=options)  # the options' "daily" replaces the plan's
    runner.run("k", {"text": "1"})
    with pytest.raises(ActionExecutionError):
        runner.run("k", {"text": "2"})
    alone = LocalRunner(planned)  # the plan's own: 5 an hour
    for n in range(5):
        alone.run("k", {"text": str(n)})
    with pytest.raises(ActionExecutionError) as caught:
        alone.run("k", {"text": "5"})
    assert "spent 5 of 5 calls in its 3600s window" in str(caught.value.cause)


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"name": "x", "window": "hour"}, "limits nothing"),
        ({"name": "x", "window": "hour", "max_calls": 1, "on_exceeded": "switch"}, "switch_to"),
        ({"name": "x", "window": "hour", "max_calls": 1, "switch_to": "m"}, "switch_to"),
        ({"name": "x", "window": 0.5, "max_calls": 1}, "at least a second"),
        ({"name": "a b", "window": "hour", "max_calls": 1}, "pattern"),
    ],
)
def test_bad_budgets_are_refused(fields, says):
    with pytest.raises(ValueError, match=says):
        Budget(**fields)


def test_two_budgets_of_one_name_are_refused():
    with pytest.raises(FlinkAgentsError, match="two budgets are named 'x'"):
        load_options({"budgets": [hourly(name="x", max_calls=1), hourly(name="x", max_calls=2)]})


def test_an_agent_budget_holds_exactly_with_many_calls_in_flight_at_once(scripted):
    """Each call is charged its estimate when admitted, so calls in flight together cannot
    all pass one check."""
    scripted.latency_s = 0.2  # every call is in flight while the others are admitted
    budget = hourly(name="shared", scope="agent", max_calls=5)
    outputs, errors = run([{"k": f"k{n}", "text": str(n)} for n in range(12)], budgets=[budget])
    assert (len(outputs), len(errors)) == (5, 7)
    assert scripted.call_count("chat") == 5


def test_a_failed_call_gives_its_reservation_back(scripted):
    scripted.fail_next(1, status=503)  # the first call to primary: backup answers
    budget = hourly(name="shared", scope="agent", max_calls=1, models=("primary",))
    outputs, errors = run(asks("a", "1", "2"), budgets=[budget])
    assert errors == []
    assert [o["by"] for o in outputs] == ["backup", "primary"]


def test_a_react_agent_carries_its_budgets_in_its_plan(scripted, tmp_path):
    model = OpenAIChatModel("primary", base_url=scripted.base_url, api_key_env="TEST_LLM_KEY")
    agent = ReActAgent(chat_model=model, budgets=[hourly(max_calls=1)])
    path = tmp_path / "react.yaml"
    save_plan(agent.to_plan(), path)
    plan = plan_from_yaml(path.read_text())
    assert plan.config["budgets"][0]["window"] == "PT1H"
    runner = LocalRunner(plan)
    assert runner.run("k", "one") == ["primary: one"]
    with pytest.raises(ActionExecutionError) as caught:
        runner.run("k", "two")
    assert isinstance(caught.value.cause, BudgetExceededError)
