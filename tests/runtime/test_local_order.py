"""The local runner reports in input order (issue 39, item 7): each input's run's outputs in
the order it emitted them, runs in the order of their inputs, whichever run ends first.

Most tests make the earlier input's run surely end last: its call (or its long-term write)
waits for a gate that a later input's run opens. A gated call fails after
``GATE_TIMEOUT_S``, so these tests also show that the keys still run side by side."""

from pathlib import Path

import pytest

from flink_agents.runtime import AgentOptions, LocalExecutionEnvironment, LocalRunner
from tests.runtime import order_agents
from tests.runtime.order_agents import GatedAgent, NoteAgent, SleepyAgent

OVERTAKEN = [
    {"k": "k", "text": "a", "gated": True},
    {"k": "k2", "text": "b", "opens": True},
    {"k": "k", "text": "c"},
    {"k": "k3", "text": "d"},
]
"""``k``'s first run waits until ``k2``'s has ended; ``k``'s second queues behind it."""

IN_INPUT_ORDER = ["k:A:1", "k:A:2", "k2:B:1", "k2:B:2", "k:C:1", "k:C:2", "k3:D:1", "k3:D:2"]


@pytest.fixture(autouse=True)
def _closed_gate():
    order_agents.reset()
    yield
    order_agents.GATE.set()  # a call still waiting ends now
    order_agents.reset()


def build(records, agent=GatedAgent, **options):
    return LocalExecutionEnvironment(**options).from_list(records, "k").apply(agent)


def test_to_list_is_in_input_order_when_a_later_run_ends_first():
    assert build(OVERTAKEN).to_list() == IN_INPUT_ORDER


def test_to_keyed_list_and_memory_stream_follow_the_same_order():
    builder = build(OVERTAKEN, memory_snapshots=True)
    assert builder.to_keyed_list() == [(output.split(":")[0], output) for output in IN_INPUT_ORDER]
    assert [(s["key"], s["run_sequence"]) for s in builder.memory_stream()] == [
        ("k", 1),
        ("k2", 1),
        ("k", 2),
        ("k3", 1),
    ]


def test_the_same_input_gives_the_same_list_every_time_whatever_the_calls_take():
    """No gate: ``k``'s call is merely the slowest; 25 runs, the exact list each time."""
    records = [
        {"k": "k", "text": "a", "delay": 0.02},
        {"k": "k2", "text": "b", "delay": 0.0},
        {"k": "k", "text": "c", "delay": 0.0},
        {"k": "k3", "text": "d", "delay": 0.01},
        {"k": "k2", "text": "e", "delay": 0.0},
    ]
    for _ in range(25):
        assert build(records, SleepyAgent).to_list() == ["k:A", "k2:B", "k:C", "k3:D", "k2:E"]


def test_a_run_parked_on_its_long_term_write_keeps_its_place(tmp_path: Path):
    records = [
        {"k": "k", "note": "a gated note"},
        {"k": "k2", "opens": True},
        {"k": "k", "note": "a second note"},
    ]
    builder = build(
        records, NoteAgent, data_dir=str(tmp_path), long_term_memory_embedding="embedder"
    )
    assert builder.to_list() == ["k:noted:a gated note", "k2:opened", "k:noted:a second note"]


def test_error_stream_is_in_input_order_with_rejected_input_at_its_place():
    records = [
        {"k": "k", "text": "a", "gated": True, "fails": -1},
        {"text": "no key"},
        {"k": "k2", "text": "b", "opens": True, "fails": -1},
        {"k": "k3", "text": "c"},
    ]
    builder = build(records, error_policy="error-output")
    assert builder.to_list() == ["k3:C:1", "k3:C:2"]
    errors = builder.error_stream()
    assert [(e["kind"], e.get("key"), e.get("input", {}).get("text")) for e in errors] == [
        ("failed_run", "k", "a"),
        ("rejected", None, "no key"),
        ("failed_run", "k2", "b"),
    ]


def test_a_retried_run_keeps_its_place_among_the_outputs():
    """``k``'s action fails once and succeeds after the backoff, long after ``k2`` ended."""
    records = [
        {"k": "k", "text": "a", "fails": 1},
        {"k": "k2", "text": "b"},
        {"k": "k", "text": "c"},
    ]
    builder = build(records, error_policy="retry", retry_initial_backoff_ms=50)
    assert builder.to_list() == ["k:A:1", "k:A:2", "k2:B:1", "k2:B:2", "k:C:1", "k:C:2"]
    assert order_agents.ATTEMPTS["a"] == 2


def test_runs_given_up_after_retries_are_in_input_order_in_the_error_stream():
    """``k``'s first attempt waits for the gate, so ``k2`` runs out of attempts first."""
    records = [
        {"k": "k", "text": "a", "gated": True, "fails": -1},
        {"k": "k2", "text": "b", "opens": True, "fails": -1},
        {"k": "k3", "text": "c"},
    ]
    builder = build(
        records, error_policy="retry", retry_max_attempts=2, retry_initial_backoff_ms=20
    )
    assert builder.to_list() == ["k3:C:1", "k3:C:2"]
    assert [(e["key"], e["attempts"]) for e in builder.error_stream()] == [("k", 2), ("k2", 2)]


def test_feed_holds_back_later_outputs_until_the_earlier_run_ends():
    runner = LocalRunner(GatedAgent)
    try:
        assert runner.feed("k", OVERTAKEN[0]) == []
        assert runner.feed("k2", OVERTAKEN[1]) == []  # k2's run ended; k's has not
        released = runner.feed("k", OVERTAKEN[2])
        released += runner.feed("k3", OVERTAKEN[3])
        released += runner.finish()
    finally:
        runner.engine.close()
    assert released == IN_INPUT_ORDER
    assert [output for _, output in runner.keyed_outputs] == IN_INPUT_ORDER


def test_run_returns_after_the_runs_of_the_records_fed_before_it():
    runner = LocalRunner(GatedAgent)
    try:
        assert runner.feed("k", OVERTAKEN[0]) == []
        assert runner.run("k2", OVERTAKEN[1]) == IN_INPUT_ORDER[:4]
        assert runner.run("k3", OVERTAKEN[3]) == ["k3:D:1", "k3:D:2"]
        assert runner.finish() == []
    finally:
        runner.engine.close()


def test_a_restored_run_takes_its_place_before_the_inputs_after_the_restore():
    runner = LocalRunner(GatedAgent, options=AgentOptions(action_log="none"))
    try:
        runner.feed("k", OVERTAKEN[0])
        runner.restore(runner.snapshot())  # the parked run is forgotten, then run again
        assert runner.feed("k2", OVERTAKEN[1]) == []
        assert runner.finish() == IN_INPUT_ORDER[:4]
    finally:
        runner.engine.close()
    assert runner.short_term_memory("k") == {"runs": 1}
