"""The parity suite's inputs and pipelines: what runs on the local runner and on MiniCluster.

Every input is generated from a fixed seed. Inputs of the ``CaseAgent`` end with one
``probe`` record per key, whose output is the key's final short-term memory, so comparing
outputs per key compares final memory too.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from flink_agents.api import ForgetKey
from tests.runtime.flink import parity_agents
from tests.runtime.flink.runners import Pipeline
from tests.runtime.forgetting_agents import Remembers

REPO = Path(__file__).resolve().parents[3]

MAX_STEPS = 25
"""``max_steps_per_run`` of the ``CaseAgent`` pipelines: a ``loop`` run hits it."""

# -- inputs ---------------------------------------------------------------------------------


def memory_ops_records() -> list[dict]:
    rng = random.Random(3)
    ops = ["set", "reset", "drop", "copy", "flatten"]
    return [{"k": f"k{rng.randrange(4)}", "op": rng.choice(ops), "n": i} for i in range(40)]


def async_order_records() -> list[dict]:
    rng = random.Random(5)
    return [{"k": f"k{i % 6}", "n": i, "delay_ms": rng.choice([0, 5, 40, 120])} for i in range(30)]


def fan_out_records() -> list[dict]:
    return [{"k": f"k{i % 3}", "n": i, "count": i % 4} for i in range(20)]


def parallel_records() -> list[dict]:
    """Fan-out runs whose members finish in random orders; some members fail."""
    rng = random.Random(41)
    records = [
        {
            "k": f"k{n % 4}",
            "n": n,
            "delays": [rng.choice([0, 5, 30, 60]) for _ in range(3)],
            "fail": {3: "b", 5: "c"}.get(n % 7),
        }
        for n in range(24)
    ]
    return with_probes(records)


def sub_agent_records() -> list[dict]:
    """Records whose run hands them to a sub-agent, with its own memory or the caller's."""
    rng = random.Random(43)
    records = [
        {"k": f"k{n % 3}", "n": n, "shared": n % 4 == 1, "delay_ms": rng.choice([0, 10, 40])}
        for n in range(18)
    ]
    return with_probes(records)


def tickets() -> list[dict]:
    return [
        {"id": f"T-{i}", "user": f"u{i % 4}", "text": text}
        for i, text in enumerate(
            ["refund please", "site is down!!!", "thanks, solved", "where is my package"] * 5
        )
    ]


MIXED_CASES = ("ops", "ops", "fail", "boom", "durable-sync", "durable-async") + ("async",) * 4


def mixed_records(
    count: int, keys: int, seed: int, cases: tuple[str, ...] = MIXED_CASES, loops: int = 0
) -> list[dict]:
    """``count`` records of random cases over ``keys`` keys, with random durable-call
    latencies of 0-30 ms; ``loops`` of them are runaway loops."""
    rng = random.Random(seed)
    records = [
        {
            "case": rng.choice(cases),
            "k": f"k{rng.randrange(keys)}",
            "n": n,
            "delay_ms": rng.randint(0, 30),
        }
        for n in range(count)
    ]
    for index in rng.sample(range(count), loops):
        records[index]["case"] = "loop"
    return records


def with_probes(records: list[dict], key: str = "k") -> list[dict]:
    """``records``, then one ``probe`` record per key (in the order keys first appear)."""
    keys = dict.fromkeys(r[key] for r in records if isinstance(r.get(key), str))
    probes = [{"case": "probe", key: k, "n": 10_000 + i} for i, k in enumerate(keys)]
    return records + probes


def with_bad_records(records: list[dict]) -> list[dict]:
    """``records`` with two records whose key cannot be taken: no key field, a list key."""
    middle = len(records) // 2
    missing = {"case": "ops", "n": 9_001, "delay_ms": 0}
    unhashable = {"case": "ops", "k": ["x"], "n": 9_002, "delay_ms": 0}
    return [*records[:5], missing, *records[5:middle], unhashable, *records[middle:]]


def flaky(key: str, n: int, fail_times: int, call: str = "") -> dict:
    """A ``flaky`` record: fails its first ``fail_times`` attempts, after a durable call
    (``call``: "sync" or "async") when given."""
    return {"case": "flaky", "k": key, "n": n, "fail_times": fail_times, "call": call}


def error_output_records() -> list[dict]:
    """200 records over 40 keys: every failing case, async calls of random latencies with
    several records per key queued behind parked runs, runaway loops, bad keys."""
    return with_probes(with_bad_records(mixed_records(200, 40, seed=11, loops=4)))


def scheduling_records() -> list[dict]:
    """Per key: reminders days ahead (one a chain of two more, one a chain without end),
    a cancelled one, a due event whose action parks on a durable call, and runs that sleep
    days (one twice) while the key's later records run."""
    records = []
    for n in range(24):
        key = f"k{n % 4}"
        record = {"k": key, "n": n, "days": 1 + (n * 7) % 5}
        if n % 6 == 1:
            record["rounds"] = 2
        if n % 8 == 3:
            record["rounds"] = -1
        if n % 5 == 2:
            record["cancel_last"] = True
        if n % 7 == 4:
            record["chase"] = (n % 3) * 30
        if n % 9 in (0, 5):
            record["nap"] = True
            record["twice"] = n % 9 == 5
        records.append(record)
    return records


def forgetting_records() -> list[Any]:
    """Three users' notes, some scheduling a follow-up or waiting for an answer, with
    ``ForgetKey`` records among them: one for a user with a follow-up pending and a run
    waiting, whose later note starts afresh, and one for a user never seen."""
    records: list[Any] = []
    for n, user in enumerate(["alice", "bob", "alice", "carol", "alice", "bob"]):
        records.append(
            {"user": user, "text": f"{user} {n}", "follow_up": n in (0, 1, 4), "ask": n in (2, 3)}
        )
    records.insert(5, ForgetKey("alice", request_id="parity"))
    records += [ForgetKey("dave"), {"user": "alice", "text": "after"}]
    return records


def retry_records() -> list[dict]:
    """Deterministic failures (which exhaust the attempts) among successes, and flaky
    records that succeed on their second or third attempt or never, each with records of
    its key queued behind it."""
    records = mixed_records(60, 10, seed=13, loops=1)
    for i, fail_times in enumerate([1, 2, 5, 1, 2, 5]):
        records.insert(8 * i + 3, flaky(f"k{i}", 100 + i, fail_times))
    return with_probes(records)


def retry_cap_records() -> list[dict]:
    """Runs that retry four times: the wait doubles, up to the cap."""
    records = [flaky("c0", 200, 4), flaky("c1", 201, 9)]
    records += [{"case": "ops", "k": f"c{i % 2}", "n": 202 + i, "delay_ms": 0} for i in range(4)]
    return with_probes(records)


def retry_drain_records() -> list[dict]:
    """One run that fails once and retries after a long backoff: the input ends first."""
    records = [flaky("r0", 250, 1), {"case": "ops", "k": "r0", "n": 251, "delay_ms": 0}]
    return with_probes(records)


def retry_durable_records() -> list[dict]:
    """Actions that fail after a durable call (sync and async), then succeed or exhaust."""
    records = []
    for i, (call, fail_times) in enumerate(
        [("sync", 1), ("async", 1), ("sync", 2), ("async", 2), ("sync", 9), ("async", 9)]
    ):
        records.append(flaky(f"d{i % 3}", 300 + i, fail_times, call))
        records.append({"case": "ops", "k": f"d{i % 3}", "n": 310 + i, "delay_ms": 0})
    return with_probes(records)


def async_records() -> list[dict]:
    """Async runs of random latencies over 20 keys, some failing after their call."""
    cases = ("async",) * 4 + ("durable-async", "ops")
    return with_probes(mixed_records(100, 20, seed=17, cases=cases))


def snapshot_records() -> list[dict]:
    records = mixed_records(40, 5, seed=19, loops=1)
    records.insert(7, {"case": "ops", "n": 9_003, "delay_ms": 0})  # the key selector raises
    return with_probes(records)


def action_log_records() -> list[dict]:
    return with_probes(mixed_records(60, 8, seed=23, loops=1))


def quiet_option_records() -> list[dict]:
    """Async runs among every failing case, for options that must not change results."""
    return with_probes(mixed_records(40, 8, seed=31, loops=1))


def long_term_records() -> list[dict]:
    requests = [
        ("ana", "remember", {"text": "I am allergic to peanuts.", "tags": "health"}),
        ("ana", "remember", {"text": "I live in Lisbon by the sea.", "tags": "home"}),
        ("bo", "remember", {"text": "I play the cello in an orchestra.", "tags": "music"}),
        ("teacher", "teach", {"text": "The Rhine flows into the North Sea."}),
        ("teacher", "teach", {"text": "Sourdough bread rises thanks to wild yeast."}),
        ("ana", "ask", {"text": "Which foods must she avoid?"}),
        # fails after writing to long-term memory, which is outside Flink's state
        ("bo", "remember", {"text": "My cat is called Pixel.", "tags": "pets", "fail": True}),
        ("bo", "ask", {"text": "What pet does he have?"}),
        ("carol", "ask", {"text": "Which foods must she avoid?"}),
        ("ana", "recall", {"tags": "home"}),
        ("ana", "look_up", {"text": "Where does that big German river end?"}),
        ("carol", "look_up", {"text": "How does bread rise?"}),
        ("bo", "forget", {}),
        ("bo", "ask", {"text": "What musical instrument does he know?"}),
        ("ana", "probe", {}),
        ("bo", "probe", {}),
    ]
    return [{"id": i, "k": k, "op": op, **rest} for i, (k, op, rest) in enumerate(requests)]


def fail_policy_records(failing_case: str) -> list[dict]:
    """Records that all succeed but one, of ``failing_case``: the third run of key k2 (after
    records 2 and 8), between others (async runs of other keys are in flight when it fails)."""
    rng = random.Random(29)
    records = [
        {
            "case": rng.choice(("async", "async", "ops")),
            "k": f"k{n % 6}",
            "n": n,
            "delay_ms": rng.randint(0, 30),
        }
        for n in range(30)
    ]
    records.insert(10, {"case": failing_case, "k": "k2", "n": 33, "delay_ms": 20})
    return records


# -- pipelines ------------------------------------------------------------------------------

CASE_OPTIONS = {"max_steps_per_run": MAX_STEPS}
PINNED_JOB = "parity-pinned-job"
"""The ``action-log-job`` of the ``poll-slow-pinned-job`` pipeline."""
COUNTERS = {"counter_dir": "{dir}"}

PIPELINES = [
    # success paths, as before
    Pipeline("memory-ops", parity_agents.MemoryOpsAgent, memory_ops_records()),
    Pipeline("async-order", parity_agents.AsyncOrderAgent, async_order_records()),
    Pipeline("fan-out", parity_agents.FanOutAgent, fan_out_records()),
    Pipeline("scheduling", parity_agents.SchedulingAgent, scheduling_records()),
    Pipeline(
        "scheduling-no-log",
        parity_agents.SchedulingAgent,
        scheduling_records(),
        options={"action_log": "none", "state_cache_keys": 0},
    ),
    Pipeline("support-triage-plan", REPO / "plans/support_triage.yaml", tickets(), key="user"),
    Pipeline("forgetting", Remembers, forgetting_records(), key="user"),
    Pipeline(
        "sub-agents",
        parity_agents.DelegatingAgent,
        sub_agent_records(),
        options={"error_policy": "error-output"},
    ),
    # fan-out groups, and the same agent one action at a time
    *(
        Pipeline(
            name,
            parity_agents.ParallelAgent,
            parallel_records(),
            options={"error_policy": "error-output", "parallel_actions": parallel},
        )
        for name, parallel in [("parallel-actions", True), ("parallel-actions-off", False)]
    ),
    # failure paths under the error policies
    Pipeline(
        "error-output",
        parity_agents.CaseAgent,
        error_output_records(),
        options={**CASE_OPTIONS, "error_policy": "error-output"},
    ),
    Pipeline(
        "retry",
        parity_agents.CaseAgent,
        retry_records(),
        options={
            **CASE_OPTIONS,
            "error_policy": "retry",
            "retry_max_attempts": 3,
            "retry_initial_backoff_ms": 20,
            "retry_max_backoff_ms": 30,
        },
        config=COUNTERS,
    ),
    Pipeline(
        "retry-cap",
        parity_agents.CaseAgent,
        retry_cap_records(),
        options={
            **CASE_OPTIONS,
            "error_policy": "retry",
            "retry_max_attempts": 5,
            "retry_initial_backoff_ms": 200,
            "retry_max_backoff_ms": 400,
        },
        config=COUNTERS,
    ),
    Pipeline(
        "retry-drain",
        parity_agents.CaseAgent,
        retry_drain_records(),
        options={
            **CASE_OPTIONS,
            "error_policy": "retry",
            "retry_max_attempts": 2,
            "retry_initial_backoff_ms": 1500,
            "retry_max_backoff_ms": 1500,
        },
        config=COUNTERS,
    ),
    *(
        Pipeline(
            f"retry-durable{suffix}",
            parity_agents.CaseAgent,
            retry_durable_records(),
            options={
                **CASE_OPTIONS,
                "error_policy": "retry",
                "retry_max_attempts": 3,
                "retry_initial_backoff_ms": 10,
                "retry_max_backoff_ms": 20,
                **log,
            },
            config=COUNTERS,
        )
        for suffix, log in [
            ("", {}),  # each runner's default
            ("-log", {"action_log": "sqlite://{dir}/actions.db"}),
            ("-nolog", {"action_log": "none"}),
        ]
    ),
    # options
    *(
        Pipeline(
            f"threads-{threads}",
            parity_agents.CaseAgent,
            async_records(),
            options={
                **CASE_OPTIONS,
                "error_policy": "error-output",
                "num_async_threads": threads,
                "max_in_flight": in_flight,
            },
        )
        for threads, in_flight in [(1, 1), (8, 3)]
    ),
    Pipeline(
        "snapshots",
        parity_agents.CaseAgent,
        snapshot_records(),
        key=parity_agents.key_of_case,
        options={**CASE_OPTIONS, "error_policy": "error-output", "memory_snapshots": True},
    ),
    *(
        Pipeline(
            f"action-log-{name}",
            parity_agents.CaseAgent,
            action_log_records(),
            options={**CASE_OPTIONS, "error_policy": "error-output", "action_log": log},
        )
        for name, log in [("on", "sqlite://{dir}/actions.db"), ("off", "none")]
    ),
    # options that change how a job works, not what it computes: how often parked runs poll
    # their durable call, how long the action log keeps records (200 ms in one: the Flink
    # job may prune while it runs), the job's name in the log, where embedded stores (the
    # default action log) live, how many keys the driver caches (none, one)
    *(
        Pipeline(
            name,
            parity_agents.CaseAgent,
            quiet_option_records(),
            options={**CASE_OPTIONS, "error_policy": "error-output", **options},
        )
        for name, options in [
            (
                "poll-fast-short-retention",
                {
                    "async_poll_interval_ms": 1,
                    "async_poll_max_interval_ms": 4,
                    "action_log_retention_ms": 200,
                    "data_dir": "{dir}/data",
                    "state_cache_keys": 1,  # keys alternate: nearly every callback reads
                },
            ),
            (
                "poll-slow-pinned-job",
                {
                    "async_poll_interval_ms": 20,
                    "async_poll_max_interval_ms": 200,
                    "action_log_retention_ms": 3_600_000,
                    "action_log_job": PINNED_JOB,
                    "data_dir": "{dir}/data",
                    "state_cache_keys": 0,
                },
            ),
        ]
    ),
]

LONG_TERM = Pipeline(
    "long-term",
    parity_agents.LongTermAgent,
    long_term_records(),
    options={"error_policy": "error-output", "long_term_memory_store": "{dir}/vectors"},
    parallelism=1,  # an embedded store per subtask: knowledge is shared within one
)
"""Long-term memory and knowledge."""

FAIL_PIPELINES = [
    Pipeline(
        f"fail-{case}",
        parity_agents.CaseAgent,
        fail_policy_records(case),
        options={**CASE_OPTIONS, "error_policy": "fail"},
    )
    for case in ("durable-sync", "durable-async", "loop")
]
