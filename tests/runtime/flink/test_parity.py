"""The same agents over the same inputs give the same outputs (per key, in order) and the
same final short-term memory on the local runner and on MiniCluster."""

import random
from collections import defaultdict
from pathlib import Path

import pytest

from tests.runtime.flink import parity_agents
from tests.runtime.flink.runners import run_agent

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.flink


def per_key(outputs: list[dict]) -> dict:
    grouped = defaultdict(list)
    for output in outputs:
        grouped[output.get("key", output.get("user"))].append(output)
    return dict(grouped)


def memory_ops_records():
    rng = random.Random(3)
    ops = ["set", "reset", "drop", "copy", "flatten"]
    return [{"k": f"k{rng.randrange(4)}", "op": rng.choice(ops), "n": i} for i in range(40)]


def async_records():
    rng = random.Random(5)
    return [{"k": f"k{i % 6}", "n": i, "delay_ms": rng.choice([0, 5, 40, 120])} for i in range(30)]


def fan_out_records():
    return [{"k": f"k{i % 3}", "n": i, "count": i % 4} for i in range(20)]


def tickets():
    return [
        {"id": f"T-{i}", "user": f"u{i % 4}", "text": text}
        for i, text in enumerate(
            ["refund please", "site is down!!!", "thanks, solved", "where is my package"] * 5
        )
    ]


CASES = {
    "memory-ops": (parity_agents.MemoryOpsAgent, memory_ops_records, "k"),
    "async-order": (parity_agents.AsyncOrderAgent, async_records, "k"),
    "fan-out": (parity_agents.FanOutAgent, fan_out_records, "k"),
    "support-triage-plan": (REPO / "plans/support_triage.yaml", tickets, "user"),
}


@pytest.fixture(scope="module")
def local_results():
    return {
        name: run_agent("local", agent, make(), key) for name, (agent, make, key) in CASES.items()
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_minicluster_matches_local_runner(case, local_results):
    agent, make_records, key = CASES[case]
    flink = run_agent("minicluster", agent, make_records(), key)
    local = local_results[case]
    assert local, "the case must produce outputs"
    assert per_key(flink) == per_key(local)
    assert sorted(map(repr, flink)) == sorted(map(repr, local))


def test_async_outputs_keep_input_order_per_key_while_keys_interleave(local_results):
    outputs = run_agent("minicluster", parity_agents.AsyncOrderAgent, async_records(), "k")
    for key, items in per_key(outputs).items():
        ns = [item["n"] for item in items]
        assert ns == sorted(ns), key
        assert items[-1]["seen"] == ns
    assert [o["n"] for o in outputs] != sorted(o["n"] for o in outputs)  # keys interleaved


def test_sensory_memory_is_cleared_between_runs_in_map_state():
    outputs = run_agent("minicluster", parity_agents.MemoryOpsAgent, memory_ops_records(), "k")
    assert all(output["sensory_at_start"] == [] for output in outputs)
    assert all(output["scratch"] == output["n"] for output in outputs)
