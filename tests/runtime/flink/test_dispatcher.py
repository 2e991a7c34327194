"""The Flink dispatcher: failure policies, draining bounded inputs, DataStream wrapping."""

import json

import pytest
from py4j.protocol import Py4JJavaError
from pyflink.common import Types

from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.plan import compile_agent
from tests.runtime import agents as agents_module
from tests.runtime.flink import policy_agents
from tests.runtime.flink.runners import flink_environment

pytestmark = pytest.mark.flink


def flaky_plan(counter_dir):
    plan = compile_agent(policy_agents.FlakyAgent)
    return plan.model_copy(update={"config": {"counter_dir": str(counter_dir)}})


def records(fail_times):
    return [{"k": f"k{n % 2}", "n": n, "fail_times": fail_times.get(n, 0)} for n in range(6)]


def test_error_output_policy_routes_failed_runs_to_the_side_output(tmp_path):
    env = flink_environment()
    agents = AgentsExecutionEnvironment.get_execution_environment(env, error_policy="error-output")
    builder = agents.from_list(records({1: 9, 4: 9}), "k").apply(flaky_plan(tmp_path))
    outputs = builder.to_datastream()
    errors = builder.error_stream()
    with errors.execute_and_collect() as failed_runs:
        failed = sorted(list(failed_runs), key=lambda e: e["input"]["n"])
    assert [(e["key"], e["input"]["n"], e["action"], e["attempts"]) for e in failed] == [
        ("k1", 1, "flaky", 1),
        ("k0", 4, "flaky", 1),
    ]
    assert failed[0]["error"] == "RuntimeError: transient failure 1 of record 1"
    assert failed[0]["run_sequence"] == 1
    del outputs


def test_error_output_keeps_the_other_runs_and_their_memory(tmp_path):
    env = flink_environment()
    agents = AgentsExecutionEnvironment.get_execution_environment(env, error_policy="error-output")
    outputs = agents.from_list(records({1: 9}), "k").apply(flaky_plan(tmp_path)).to_list()
    by_n = {o["n"]: o for o in outputs}
    assert sorted(by_n) == [0, 2, 3, 4, 5]
    assert by_n[5]["done"] == [3, 5]  # run 1 of key k1 left nothing behind


def test_retry_policy_retries_with_backoff_until_the_action_succeeds(tmp_path):
    env = flink_environment()
    agents = AgentsExecutionEnvironment.get_execution_environment(
        env, error_policy="retry", retry_max_attempts=4, retry_initial_backoff_ms=20
    )
    outputs = agents.from_list(records({0: 2, 3: 3}), "k").apply(flaky_plan(tmp_path)).to_list()
    assert sorted(o["n"] for o in outputs) == [0, 1, 2, 3, 4, 5]
    assert (tmp_path / "0").read_text() == "3" and (tmp_path / "3").read_text() == "4"
    by_key = {o["key"]: o["done"] for o in outputs if o["n"] >= 4}
    assert by_key == {"k0": [0, 2, 4], "k1": [1, 3, 5]}


def test_retry_policy_gives_up_after_its_attempts_into_the_error_output(tmp_path):
    env = flink_environment()
    agents = AgentsExecutionEnvironment.get_execution_environment(
        env, error_policy="retry", retry_max_attempts=2, retry_initial_backoff_ms=10
    )
    builder = agents.from_list(records({2: 5}), "k").apply(flaky_plan(tmp_path))
    builder.to_datastream()
    with builder.error_stream().execute_and_collect() as failed_runs:
        (failed,) = list(failed_runs)
    assert (failed["input"]["n"], failed["attempts"]) == (2, 2)


def test_fail_policy_fails_the_job_naming_key_action_and_input(tmp_path):
    env = flink_environment()
    agents = AgentsExecutionEnvironment.get_execution_environment(env, error_policy="fail")
    with pytest.raises(Py4JJavaError) as caught:
        agents.from_list(records({3: 1}), "k").apply(flaky_plan(tmp_path)).to_list()
    message = str(caught.value)
    assert "action 'flaky' failed for key 'k1' (run 2, input {'k': 'k1', 'n': 3" in message
    assert "RuntimeError: transient failure 1 of record 3" in message


def test_bounded_input_drains_runs_still_waiting_on_async_work():
    """Every run waits 300 ms; the input ends long before: all outputs still arrive."""
    env = flink_environment(parallelism=1)
    agents = AgentsExecutionEnvironment.get_execution_environment(env, num_async_threads=4)
    data = [{"k": f"k{n % 7}", "n": n, "seconds": 0.3} for n in range(21)]
    outputs = agents.from_list(data, "k").apply(policy_agents.SlowAgent).to_list()
    assert sorted(o["n"] for o in outputs) == list(range(21))


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_a_finished_call_is_resumed_from_another_keys_callback(mode):
    """A parked run whose call has finished is resumed by the next callback of any key, not
    at its poll (in both execution modes): here its first poll is a minute away, so without
    that the run would end only at the drain, after every other output. The records behind
    it wait in their actions until the call has finished (then 5 ms each)."""
    env = flink_environment(parallelism=1, mode=mode)
    agents = AgentsExecutionEnvironment.get_execution_environment(
        env, async_poll_interval_ms=60_000, async_poll_max_interval_ms=60_000
    )
    data = [{"k": "a", "n": 0, "kind": "call"}]
    data += [{"k": f"b{n}", "n": n, "kind": "wait"} for n in range(1, 61)]
    outputs = agents.from_list(data, "k").apply(policy_agents.CallThenTrafficAgent).to_list()
    assert sorted(outputs) == list(range(61))
    assert outputs.index(0) < 60, outputs  # not left for the drain


def test_from_datastream_returns_a_stream_users_keep_building_on():
    env = flink_environment()
    source = env.from_collection(
        [("k0", 1), ("k1", 2), ("k0", 3)], type_info=Types.TUPLE([Types.STRING(), Types.INT()])
    ).map(lambda t: {"k": t[0], "n": t[1], "count": 1}, output_type=Types.PICKLED_BYTE_ARRAY())
    agents = AgentsExecutionEnvironment.get_execution_environment(env)
    from tests.runtime.flink.parity_agents import FanOutAgent

    outputs = agents.from_datastream(source, key_selector=lambda r: r["k"]).apply(FanOutAgent)
    downstream = outputs.to_datastream().map(
        lambda o: f"{o['key']}:{o['n']}", output_type=Types.STRING()
    )
    with downstream.execute_and_collect() as results:
        assert sorted(results) == ["k0:1", "k0:3", "k1:2"]


def test_the_key_taking_step_keys_the_stream_itself():
    """One Python step between the input and the dispatcher: the key-taking step's rows are
    keyed as they are (PyFlink's ``key_by`` would add a step of its own, a Python call per
    record)."""
    env = flink_environment()
    agents = AgentsExecutionEnvironment.get_execution_environment(env)
    source = env.from_collection(["a", "b"], type_info=Types.STRING())
    agents.from_datastream(source, lambda r: r).apply(agents_module.EchoAgent).to_datastream()
    nodes = {node["id"]: node for node in json.loads(env.get_execution_plan())["nodes"]}
    (agent,) = [n for n in nodes.values() if n["type"] == "agent:EchoAgent"]
    (edge,) = agent["predecessors"]
    assert edge["ship_strategy"] == "HASH"
    key_step = nodes[edge["id"]]
    assert key_step["type"] == "agent-key:EchoAgent"
    assert [nodes[p["id"]]["type"] for p in key_step["predecessors"]] == [
        "Source: Collection Source"
    ]


def outputs_and_errors(builder) -> list[tuple[str, object]]:
    """Run the job; its outputs as ``("out", output)`` and its error records as
    ``("err", record)``, in the order they were collected."""
    tagged = builder.to_datastream().map(
        lambda o: ("out", o), output_type=Types.PICKLED_BYTE_ARRAY()
    )
    errors = builder.error_stream().map(
        lambda e: ("err", e), output_type=Types.PICKLED_BYTE_ARRAY()
    )
    with tagged.union(errors).execute_and_collect() as results:
        return list(results)


def test_a_record_whose_key_cannot_be_taken_goes_to_the_error_output_not_the_job():
    """Missing field, unhashable value: bad input, even under the fail policy; every other
    record is processed, in order per key."""
    env = flink_environment()
    agents = AgentsExecutionEnvironment.get_execution_environment(env, error_policy="fail")
    good = [{"user": f"u{n % 2}", "n": n} for n in range(6)]
    bad = [{"n": 100}, {"user": ["x"], "n": 101}]
    builder = agents.from_list(good[:3] + bad + good[3:], "user").apply(agents_module.EchoAgent)
    collected = outputs_and_errors(builder)
    outputs = [value for tag, value in collected if tag == "out"]
    assert [o["n"] for o in outputs if o["user"] == "u0"] == [0, 2, 4]
    assert [o["n"] for o in outputs if o["user"] == "u1"] == [1, 3, 5]
    rejected = sorted((v for tag, v in collected if tag == "err"), key=lambda e: e["input"]["n"])
    assert rejected == [
        {"kind": "rejected", "reason": "record has no key field 'user'", "input": bad[0]},
        {"kind": "rejected", "reason": "key ['x'] is not hashable (list)", "input": bad[1]},
    ]


def _key_of(record):
    return record["k"]


def _parse(line):
    import json

    return json.loads(line)


@pytest.mark.parametrize(
    ("key_type", "keys"),
    [
        (Types.STRING(), ["a", "b", "\x00flink-agents:rejected-input"]),  # the reserved key
        (Types.LONG(), [1, 2, None]),  # no reserved key fits: the side-output path
    ],
    ids=["string-keys", "long-keys"],
)
def test_rejected_records_reach_the_error_output_whatever_the_key_type(key_type, keys):
    """String and pickled keys send a rejected record to the dispatcher under a reserved key
    (kept out of a side output of the key-taking step, which cost it its chaining); other
    key types use that side output. Either way it reaches ``error_stream()``; a record whose
    key is the reserved string itself is rejected, not taken for one."""
    env = flink_environment()
    agents = AgentsExecutionEnvironment.get_execution_environment(env)
    good = [{"k": keys[n % 2], "n": n} for n in range(4)]
    bad = [{"n": 100}]
    if keys[2] is not None:
        bad.append({"k": keys[2], "n": 101})
    lines = [json.dumps(r) for r in good[:2] + bad + good[2:]]
    source = env.from_collection(lines, type_info=Types.STRING()).map(
        _parse, output_type=Types.PICKLED_BYTE_ARRAY()
    )
    builder = agents.from_datastream(source, _key_of, key_type=key_type)
    builder.apply(agents_module.EchoAgent)
    collected = outputs_and_errors(builder)
    assert sorted(v["n"] for tag, v in collected if tag == "out") == [0, 1, 2, 3]
    rejected = sorted((v for tag, v in collected if tag == "err"), key=lambda e: e["input"]["n"])
    assert [(e["kind"], e["input"]) for e in rejected] == [("rejected", r) for r in bad]
    assert rejected[0]["reason"] == "the key selector raised KeyError: 'k'"
    if len(rejected) > 1:
        assert "is reserved by flink-agents" in rejected[1]["reason"]
