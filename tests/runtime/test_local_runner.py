"""The local runner: inputs and keys, event dispatch, memory scopes, failures and resources."""

import asyncio
import gc
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flink_agents.api import (
    ActionExecutionError,
    Agent,
    AgentsExecutionEnvironment,
    FlinkAgentsError,
    InputEvent,
    OutputEvent,
    PlanError,
    action,
)
from flink_agents.plan import compile_agent, validate_plan_data
from flink_agents.runtime import LocalExecutionEnvironment, LocalRunner
from tests.runtime import agents

REPO = Path(__file__).resolve().parents[2]
TRIAGE_PLAN = REPO / "plans" / "support_triage.yaml"


def run_all(agent, records, key_selector=None):
    env = AgentsExecutionEnvironment.get_execution_environment()
    return env.from_list(records, key_selector).apply(agent).to_list()


# --- environment, inputs and keys ---------------------------------------------------------


def test_outputs_that_look_like_the_runners_channels_are_outputs():
    """An output that is a pair starting with "errors" or "memory-snapshots" is an output,
    not an error record or a memory snapshot (the runner's channels are objects of its own).
    """
    records = [("errors", 1), ("memory-snapshots", 2), ["errors", 3]]
    builder = LocalExecutionEnvironment(memory_snapshots=True).from_list(records, None)
    builder = builder.apply(agents.EchoAgent)
    assert builder.to_list() == records
    assert builder.error_stream() == []
    assert len(builder.memory_stream()) == len(records)


def test_get_execution_environment_without_args_is_local():
    env = AgentsExecutionEnvironment.get_execution_environment()
    assert isinstance(env, LocalExecutionEnvironment)


def test_to_list_returns_outputs_in_input_order():
    records = [{"user": u, "n": i} for i, u in enumerate("abacba")]
    assert run_all(agents.EchoAgent, records, "user") == records


def test_key_selector_field_name():
    records = [{"user": "a"}, {"user": "b"}, {"user": "a"}]
    assert run_all(agents.CounterAgent, records, "user") == [1, 1, 2]


@dataclass
class Ticket:
    """A record with attributes (module level: records are pickled, as on Flink)."""

    user: str


def test_key_selector_field_name_reads_attributes_of_objects():
    records = [Ticket("a"), Ticket("b")]
    builder = LocalExecutionEnvironment().from_list(records, "user").apply(agents.EchoAgent)
    assert builder.to_keyed_list() == [("a", records[0]), ("b", records[1])]


def test_a_record_whose_key_cannot_be_taken_goes_to_the_error_stream():
    """Bad input, not a failed run: whatever the policy, the good records still run."""
    records = [{"user": "a"}, {"name": "x"}, {"user": ["l"]}, {"user": "b"}]
    builder = (
        LocalExecutionEnvironment(error_policy="fail")
        .from_list(records, "user")
        .apply(agents.EchoAgent)
    )
    assert builder.to_list() == [records[0], records[3]]
    assert builder.error_stream() == [
        {"kind": "rejected", "reason": "record has no key field 'user'", "input": records[1]},
        {"kind": "rejected", "reason": "key ['l'] is not hashable (list)", "input": records[2]},
    ]


def test_a_key_selector_that_raises_rejects_the_record():
    def first_letter(record: str) -> str:
        return record[0]

    builder = LocalExecutionEnvironment().from_list(["ann", "", "bo"], first_letter)
    assert builder.apply(agents.EchoAgent).to_list() == ["ann", "bo"]
    (error,) = builder.error_stream()
    assert error == {
        "kind": "rejected",
        "reason": "the key selector raised IndexError: string index out of range",
        "input": "",
    }


def test_key_selector_callable():
    records = ["Ann", "ann", "Bob", "ANN"]
    assert run_all(agents.CounterAgent, records, str.lower) == [1, 2, 1, 3]


def test_key_selector_none_runs_everything_under_key_none():
    env = AgentsExecutionEnvironment.get_execution_environment()
    builder = env.from_list(["x", "y", "z"]).apply(agents.CounterAgent)
    assert builder.to_keyed_list() == [(None, 1), (None, 2), (None, 3)]
    assert builder.runner.keys == [None]


def test_to_keyed_list_pairs_each_output_with_its_key():
    env = AgentsExecutionEnvironment.get_execution_environment()
    records = [{"k": "a", "n": 2, "label": "x"}, {"k": "b", "n": 0}, {"k": "b", "n": 1}]
    pairs = env.from_list(records, "k").apply(agents.RepeatAgent).to_keyed_list()
    assert pairs == [("a", ["x", 0]), ("a", ["x", 1]), ("b", [None, 0])]


@pytest.mark.parametrize(
    "make_agent",
    [
        lambda: agents.EchoAgent,
        lambda: agents.EchoAgent(),
        lambda: compile_agent(agents.EchoAgent),
    ],
    ids=["class", "instance", "plan"],
)
def test_apply_accepts_class_instance_and_plan(make_agent):
    assert run_all(make_agent(), [1, 2]) == [1, 2]


@pytest.mark.parametrize("as_type", [str, Path], ids=["str", "Path"])
def test_apply_accepts_a_plan_file_path(as_type):
    tickets = [{"user": "u", "id": "t1", "text": "I need a refund"}]
    [decision] = run_all(as_type(TRIAGE_PLAN), tickets, "user")
    assert decision["route"] == "finance"


def test_apply_twice_is_rejected():
    builder = LocalExecutionEnvironment().from_list([1]).apply(agents.EchoAgent)
    with pytest.raises(FlinkAgentsError, match="already applied"):
        builder.apply(agents.EchoAgent)


def test_outputs_before_apply_are_rejected():
    with pytest.raises(FlinkAgentsError, match="apply"):
        LocalExecutionEnvironment().from_list([1]).to_list()


def test_agent_defined_inside_a_function_is_rejected():
    class LocalAgent(Agent):
        @action(InputEvent)
        @staticmethod
        def echo(event, ctx) -> None:
            ctx.send_event(OutputEvent(output=event.input))

    with pytest.raises(PlanError, match="inside a function") as caught:
        LocalRunner(LocalAgent)
    assert caught.value.agent == "LocalAgent"
    assert caught.value.action == "echo"


# --- dispatch -------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 5])
def test_a_run_emits_zero_one_or_many_outputs(n):
    runner = LocalRunner(agents.RepeatAgent)
    assert runner.run("k", {"n": n, "label": "L"}) == [["L", i] for i in range(n)]


def test_actions_chain_through_user_defined_events():
    assert LocalRunner(agents.ChainAgent).run("k", 21) == ["21->42"]


def test_action_on_a_base_event_class_fires_for_subclasses():
    assert LocalRunner(agents.SubclassAgent).run("k", "rex") == ["Dog:rex"]


def test_actions_listening_to_the_same_event_fire_in_plan_order():
    assert LocalRunner(agents.TwoListenersAgent).run("k", None) == ["second", "first"]


def test_events_are_processed_first_in_first_out():
    assert LocalRunner(agents.FifoAgent).run("k", None) == ["A", "B", "C"]


def test_async_actions_run():
    runner = LocalRunner(agents.AsyncAgent)
    assert [runner.run("k", n) for n in (1, 2, 3)] == [[1], [3], [6]]
    assert runner.short_term_memory("k") == {"total": 6}


def test_async_actions_run_when_the_runner_is_called_from_a_running_event_loop():
    async def main():
        return LocalRunner(agents.AsyncAgent).run("k", 1)

    with warnings.catch_warnings():  # the failing run leaves its coroutine never awaited
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            outputs = asyncio.run(main())
        except ActionExecutionError as error:
            outputs = str(error)
        gc.collect()
    assert outputs == [1]


def test_endless_run_stops_at_the_step_limit():
    runner = LocalRunner(agents.LoopAgent, max_steps=50)
    with pytest.raises(ActionExecutionError, match="exceeded 50 steps") as caught:
        runner.run("k", None)
    assert caught.value.action == "again"
    assert runner.steps == 50


def test_send_event_rejects_values_that_are_not_events():
    with pytest.raises(ActionExecutionError, match="send_event takes an Event") as caught:
        LocalRunner(agents.BadSendAgent).run("k", "dict")
    assert isinstance(caught.value.cause, TypeError)


def test_send_event_rejects_input_events():
    with pytest.raises(ActionExecutionError, match="cannot send an InputEvent") as caught:
        LocalRunner(agents.BadSendAgent).run("k", "input")
    assert isinstance(caught.value.cause, FlinkAgentsError)


def test_ctx_config_is_the_plan_config_and_ctx_key_the_key():
    [output] = LocalRunner(agents.ConfigAgent).run(("user", 7), None)
    assert output == {
        "key": ("user", 7),
        "config": {"greeting": "hello", "level": 1},
        "writable": False,
    }


def test_ctx_config_merges_the_action_config_over_the_plan_config():
    data = compile_agent(agents.ConfigAgent).model_dump()
    data["actions"][0]["config"] = {"level": 2, "extra": True}
    [output] = LocalRunner(validate_plan_data(data)).run("k", None)
    assert output["config"] == {"greeting": "hello", "level": 2, "extra": True}


# --- memory ---------------------------------------------------------------------------


def test_sensory_memory_is_visible_later_in_the_run_and_cleared_after_it():
    runner = LocalRunner(agents.SensoryAgent)
    assert runner.run("k", "one") == [{"before": None, "seen": "one", "nested": "one"}]
    assert runner.sensory_memory("k") == {}
    assert runner.run("k", "two") == [{"before": None, "seen": "two", "nested": "two"}]
    assert runner.sensory_memory("k") == {}


def test_short_term_memory_persists_across_runs_of_a_key():
    runner = LocalRunner(agents.CounterAgent)
    assert [runner.run("k", x) for x in "abc"] == [[1], [2], [3]]
    assert runner.short_term_memory("k") == {"count": 3, "inputs": ["a", "b", "c"]}
    assert runner.runs("k") == 3


def test_keys_do_not_see_each_others_short_term_memory():
    runner = LocalRunner(agents.CounterAgent)
    assert runner.run("a", 1) == [1]
    assert runner.run("b", 2) == [1]
    assert runner.run("a", 3) == [2]
    assert runner.short_term_memory("a") == {"count": 2, "inputs": [1, 3]}
    assert runner.short_term_memory("b") == {"count": 1, "inputs": [2]}
    assert runner.short_term_memory("unseen") == runner.sensory_memory("unseen") == {}
    assert runner.keys == ["a", "b"]  # (reading a key's memory keeps nothing of it)


@given(st.lists(st.sampled_from("abc"), max_size=20))
def test_each_key_counts_only_its_own_runs(records):
    """Outputs are each key's running count, however the keys interleave."""
    outputs = run_all(agents.CounterAgent, records, str)
    expected, seen = [], {}
    for key in records:
        seen[key] = seen.get(key, 0) + 1
        expected.append(seen[key])
    assert outputs == expected


# --- failures -------------------------------------------------------------------------


def test_failing_action_raises_error_naming_key_action_input_and_run():
    runner = LocalRunner(agents.FailingAgent)
    runner.run("user-1", {"id": 1})
    record = {"id": 2, "fail": True}
    with pytest.raises(ActionExecutionError) as caught:
        runner.run("user-1", record)
    error = caught.value
    assert (error.key, error.action, error.run_sequence) == ("user-1", "explode", 2)
    assert error.input == record
    assert isinstance(error.cause, ValueError)
    assert str(error) == (
        "action 'explode' failed for key 'user-1' (run 2, input {'id': 2, 'fail': True}): "
        "ValueError: boom"
    )


def test_failing_action_writes_are_discarded_earlier_actions_writes_kept():
    runner = LocalRunner(agents.FailingAgent)
    with pytest.raises(ActionExecutionError):
        runner.run("k", {"id": 1, "fail": True})
    # prepare's write stays; explode's delete, set and new_object are gone; after never ran.
    assert runner.short_term_memory("k") == {"kept": 1}
    assert runner.sensory_memory("k") == {}


def test_failing_action_sent_events_are_discarded():
    runner = LocalRunner(agents.FailingAgent)
    with pytest.raises(ActionExecutionError):
        runner.run("k", {"id": 1, "fail": True})
    assert "after" not in runner.short_term_memory("k")
    assert runner.outputs_per_key["k"] == 0


def test_next_run_after_a_failure_works_normally():
    runner = LocalRunner(agents.FailingAgent)
    with pytest.raises(ActionExecutionError):
        runner.run("k", {"id": 1, "fail": True})
    assert runner.run("k", {"id": 2}) == ["exploded", "after"]
    assert runner.short_term_memory("k") == {"lost": 1, "lost_object": {"x": 1}, "after": True}
    assert runner.runs("k") == 2


def test_a_failure_does_not_touch_other_keys():
    runner = LocalRunner(agents.FailingAgent)
    runner.run("good", {"id": 1})
    with pytest.raises(ActionExecutionError):
        runner.run("bad", {"id": 2, "fail": True})
    assert runner.short_term_memory("good") == {"lost": 1, "lost_object": {"x": 1}, "after": True}


# --- resources ------------------------------------------------------------------------


@pytest.fixture
def provider_calls():
    agents.PROVIDER_CALLS.clear()
    yield agents.PROVIDER_CALLS
    agents.PROVIDER_CALLS.clear()


def test_resource_is_created_lazily(provider_calls):
    runner = LocalRunner(agents.ResourceAgent)
    assert runner.run("k", {"mode": "none"}) == [None]
    assert provider_calls == []


def test_resource_is_created_once_and_shared_across_runs_and_keys(provider_calls):
    runner = LocalRunner(agents.ResourceAgent)
    found = [
        runner.run(key, {"mode": mode})[0]
        for key, mode in [("a", "typed"), ("a", "untyped"), ("b", "typed")]
    ]
    assert isinstance(found[0], agents.Store)
    assert found[0].prefix == "db"
    assert found[1] is found[0] and found[2] is found[0]
    assert provider_calls == [{"prefix": "db"}]


def test_each_runner_creates_its_own_resource(provider_calls):
    first = LocalRunner(agents.ResourceAgent).run("k", {"mode": "typed"})[0]
    second = LocalRunner(agents.ResourceAgent).run("k", {"mode": "typed"})[0]
    assert first is not second
    assert len(provider_calls) == 2


def test_resource_of_the_wrong_type_is_a_clear_error(provider_calls):
    [error] = LocalRunner(agents.ResourceAgent).run("k", {"mode": "wrong_type"})
    assert isinstance(error, FlinkAgentsError)
    assert str(error) == "resource 'store' is a custom, not a chat_model"
    assert provider_calls == []


def test_unknown_resource_is_a_clear_error(provider_calls):
    [error] = LocalRunner(agents.ResourceAgent).run("k", {"mode": "unknown"})
    assert isinstance(error, FlinkAgentsError)
    assert "no resource named 'no_such_resource'" in str(error)
    assert "declared: store" in str(error)


# --- the demo agent -------------------------------------------------------------------

TICKETS = [
    {"user": "ann", "id": "t1", "text": "I was charged twice, please refund"},
    {"user": "bob", "id": "t2", "text": "Thanks, solved!"},
    {"user": "ann", "id": "t3", "text": "Wrong invoice again"},
    {"user": "bob", "id": "t4", "text": "The site is down"},
    {"user": "ann", "id": "t5", "text": "Payment failed"},
    {"user": "ann", "id": "t6", "text": "Another bill question"},
]


def test_support_triage_routes_tickets_and_escalates_the_third_in_a_category():
    outputs = run_all(TRIAGE_PLAN, TICKETS, "user")
    routing = [
        (o["ticket"], o["category"], o["priority"], o["route"]) for o in outputs if "route" in o
    ]
    assert routing == [
        ("t1", "billing", "low", "finance"),
        ("t3", "billing", "high", "finance"),
        ("t4", "outage", "normal", "sre"),
        ("t5", "billing", "normal", "finance"),
        ("t6", "billing", "normal", "finance"),
    ]
    escalations = [o for o in outputs if "escalation" in o]
    assert escalations == [
        {"user": "ann", "escalation": "billing", "reason": "3 billing tickets", "ticket": "t5"}
    ]
    assert outputs.index(escalations[0]) == 4  # right after t5's routing decision


def test_support_triage_remembers_each_users_history():
    builder = LocalExecutionEnvironment().from_list(TICKETS, "user").apply(TRIAGE_PLAN)
    builder.to_list()
    ann = builder.runner.short_term_memory("ann")
    assert ann["profile"] == {
        "tickets": 4,
        "categories": {"billing": 4},
        "recent": ["t3", "t5", "t6"],
    }
    assert ann["escalated"] == ["billing"]
    assert builder.runner.short_term_memory("bob")["last_closed"] == "t2"


@pytest.mark.parametrize("path", ["plain", "driven", "stepped"])
def test_events_reach_the_actions_of_their_classes_and_output_subclasses_are_outputs(
    path, tmp_path
):
    from flink_agents.runtime import AgentOptions

    # Runs of a known key take the plain path unless memory snapshots are on (then they are
    # driven) or the event log is (then every action is stepped).
    options = {
        "plain": {},
        "driven": {"memory_snapshots": True},
        "stepped": {"event_log_level": "standard", "event_log_dir": str(tmp_path)},
    }[path]
    runner = LocalRunner(agents.RoutingAgent, options=AgentOptions(**options))
    for word in ("a", "b", "c"):  # a key's first run, then runs of a known key
        outputs = runner.run("k", word)
        # LoudNote: ``loud`` (its own class) and ``any_note`` (its base), in plan order;
        # then the plain Note, which only ``any_note`` takes.
        assert outputs == [("loud", word), ("note", word), ("note", word.upper())]


def test_send_event_rejects_input_events_every_time():
    runner = LocalRunner(agents.BadSendAgent)
    for _ in range(3):
        with pytest.raises(ActionExecutionError, match="cannot send an InputEvent"):
            runner.run("k", "input")
        with pytest.raises(ActionExecutionError, match="send_event takes an Event"):
            runner.run("k", "dict")
