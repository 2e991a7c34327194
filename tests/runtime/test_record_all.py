"""``action-log-record: all``: every completed action recorded with its memory changes and
events (an audit of what an agent did to a key), on the local runner and on MiniCluster;
the same outputs and memory as the default, and a restore that replays every action."""

from __future__ import annotations

from pathlib import Path

import pytest

from flink_agents.api import FlinkAgentsError
from flink_agents.runtime import AgentOptions, load_options
from flink_agents.runtime._local import LocalRunner
from flink_agents.runtime.action_log import InMemoryActionLog, key_history, open_action_log
from flink_agents.runtime.journal import ActionJournal
from tests.runtime import record_all_agents
from tests.runtime.record_all_agents import CALLS, AuditAgent

RECORDS = [{"k": f"k{n % 2}", "n": n} for n in range(8)]
PROBES = [{"k": "k0", "probe": True}, {"k": "k1", "probe": True}]


@pytest.fixture(autouse=True)
def _fresh_calls():
    CALLS.clear()


def runner(mode: str, log, job: str = "job-1", **journal_args) -> LocalRunner:
    journal = ActionJournal(log, job, **journal_args)
    return LocalRunner(AuditAgent, journal=journal, options=AgentOptions(action_log_record=mode))


def run_all(local: LocalRunner, records: list[dict]) -> list:
    return [output for record in records for output in local.run(record["k"], record)]


def actions_by_run(log, key: str, job: str = "job-1") -> dict[int, list[str]]:
    history = key_history(log, job, key)
    return {run.run_sequence: [a.identity.action for a in run.actions] for run in history.runs}


def changes_of(log, key: str, action: str, job: str = "job-1") -> list[list[dict]]:
    """Each run's short-term changes by ``action``, as the history's JSON has them."""
    history = key_history(log, job, key).to_json()
    return [
        a["memory"]["short_term"]
        for run in history["runs"]
        for a in run["actions"]
        if a["action"] == action
    ]


def test_the_default_records_only_the_action_with_a_durable_call():
    log = InMemoryActionLog()
    local = runner("restore", log)
    run_all(local, RECORDS)
    local.engine.journal.flush()
    assert actions_by_run(log, "k1") == {1: ["answer"], 2: ["answer"], 3: ["answer"], 4: ["answer"]}


def test_with_all_every_action_of_every_run_is_recorded_with_its_memory_changes():
    log = InMemoryActionLog()
    local = runner("all", log)
    run_all(local, RECORDS)
    local.engine.journal.flush()
    every_action = ["tally", "note", "answer"]
    assert actions_by_run(log, "k1") == {run: every_action for run in (1, 2, 3, 4)}
    # ``note`` makes no call and sends nothing: only its changes to short-term memory.
    assert changes_of(log, "k1", "note") == [
        [  # n = 1: creates notes
            {
                "op": "object",
                "path": "",
                "fields": ["count", "notes"],
                "old": {"fields": ["count"]},
            },
            {"op": "object", "path": "notes", "fields": ["last", "odd"], "old": None},
            {"op": "set", "path": "notes.last", "value": 1, "old": None},
            {"op": "set", "path": "notes.odd", "value": True, "old": None},
        ],
        [  # n = 3: deletes notes.odd
            {"op": "delete", "path": "notes.odd", "old": True},
            {"op": "set", "path": "notes.last", "value": 3, "old": 1},
            {
                "op": "object",
                "path": "notes",
                "fields": ["last"],
                "old": {"fields": ["last", "odd"]},
            },
        ],
        [  # n = 5
            {"op": "set", "path": "notes.last", "value": 5, "old": 3},
            {
                "op": "object",
                "path": "notes",
                "fields": ["last", "odd"],
                "old": {"fields": ["last"]},
            },
            {"op": "set", "path": "notes.odd", "value": True, "old": None},
        ],
        [  # n = 7
            {"op": "set", "path": "notes.last", "value": 7, "old": 5},
            {"op": "set", "path": "notes.odd", "value": True, "old": True},
        ],
    ]
    first_run = key_history(log, "job-1", "k1").runs[0].actions
    tally = first_run[0]
    assert [type(e).__name__ for e in tally.events] == ["Tallied"]
    assert [(c.tier, c.op, c.path) for c in tally.memory] == [
        ("short_term", "object", ""),
        ("short_term", "set", "count"),
        ("sensory", "object", ""),
        ("sensory", "set", "n"),
    ]
    assert [c.result for c in first_run[2].calls] == ["answer 1"]  # ``answer``'s call


def test_all_gives_the_same_outputs_and_memory_as_the_default():
    observed = {}
    for mode in ("restore", "all"):
        local = runner(mode, InMemoryActionLog())
        outputs = run_all(local, RECORDS + PROBES)
        observed[mode] = (outputs, local.snapshot())
    (restore_out, restore_maps), (all_out, all_maps) = observed["restore"], observed["all"]
    assert all_out == restore_out
    assert all_out[-2:] == [
        {"key": "k0", "memory": {"count": 4, "notes": {"last": 6}}},
        {"key": "k1", "memory": {"count": 4, "notes": {"last": 7, "odd": True}}},
    ]
    for key in ("k0", "k1"):  # the very same flattened maps, markers included
        assert all_maps.short_term[key].data == restore_maps.short_term[key].data
        assert all_maps.sensory[key].data == restore_maps.sensory[key].data == {}


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_restore_with_all_replays_every_action_and_calls_nothing_again(tmp_path, backend):
    log = InMemoryActionLog() if backend == "memory" else open_action_log(tmp_path / "log.db")
    first = runner("all", log)
    run_all(first, RECORDS[:3])
    checkpoint = first.snapshot()
    after_checkpoint = run_all(first, RECORDS[3:] + PROBES)
    maps_before_failure = first.snapshot()
    calls = dict(CALLS)
    first.engine.journal.flush()

    # The job fails; Flink restores the checkpoint and the source replays what came after.
    second = runner("all", log)
    second.restore(checkpoint)
    assert run_all(second, RECORDS[3:] + PROBES) == after_checkpoint
    assert dict(CALLS) == calls  # no recorded call made again
    assert second.engine.journal.replayed_actions == 5 * 3 + 2  # 5 runs x 3 actions, 2 probes
    restored = second.snapshot()
    for key in ("k0", "k1"):
        assert restored.short_term[key].data == maps_before_failure.short_term[key].data
    second.engine.journal.flush()
    assert actions_by_run(log, "k1")[4] == ["tally", "note", "answer"]
    log.close()


def test_a_record_lost_in_a_crash_with_all_runs_its_action_again_its_call_from_the_log():
    """Records still queued when the process dies are lost: those actions run again on
    replay (the plain ones as they ran, ``answer`` with its call answered from the log),
    the written ones are replayed; the memory ends the same."""
    log = InMemoryActionLog()
    first = runner("all", log, batch_delay_ms=60_000)  # written only when flushed
    checkpoint = first.snapshot()
    outputs = run_all(first, RECORDS[:4])
    first.engine.journal.flush()  # these 4 runs (12 actions) reach the log
    outputs += run_all(first, RECORDS[4:] + PROBES)  # these records stay queued
    maps_before_failure = first.snapshot()
    calls = dict(CALLS)
    first.engine.journal._writer.discard()  # the crash

    second = runner("all", log)
    second.restore(checkpoint)
    assert run_all(second, RECORDS + PROBES) == outputs
    assert dict(CALLS) == calls
    assert second.engine.journal.replayed_actions == 12
    assert second.engine.journal.reused_calls == 4  # the lost runs' ``answer`` calls
    restored = second.snapshot()
    for key in ("k0", "k1"):
        assert restored.short_term[key].data == maps_before_failure.short_term[key].data
    second.engine.journal.flush()
    assert log.count("job-1") == 8 * 3 + 2  # every action of every run, now


def test_a_plain_action_that_fails_is_not_recorded_and_its_retry_is():
    log = InMemoryActionLog()
    options = AgentOptions(
        action_log_record="all", error_policy="retry", retry_initial_backoff_ms=1
    )
    local = LocalRunner(
        record_all_agents.Flaky, journal=ActionJournal(log, "job-1"), options=options
    )
    assert local.run("k", 1) == ["done"]
    local.engine.journal.flush()
    [run] = key_history(log, "job-1", "k").runs
    [entry] = run.actions
    assert entry.completed and [c.path for c in entry.memory] == ["", "tries"]
    assert entry.memory[1].value == 2  # the attempt that completed
    assert local.short_term_memory("k") == {"tries": 2}


def test_the_option_in_config_yaml_and_a_bad_value_named(tmp_path: Path):
    (tmp_path / "config.yaml").write_text("agent:\n  action-log-record: all\n")
    assert load_options(conf_dir=str(tmp_path)).action_log_record == "all"
    assert load_options().action_log_record == "restore"
    with pytest.raises(FlinkAgentsError) as caught:
        load_options({"action_log_record": "everything"})
    assert str(caught.value) == (
        "agent option 'action_log_record' passed in code: must be 'restore' or 'all' "
        "(got 'everything')"
    )
    (tmp_path / "config.yaml").write_text("agent:\n  action-log-record: al\n")
    with pytest.raises(
        FlinkAgentsError,
        match=r"config.yaml, line 2: agent option "
        r"'action-log-record': must be 'restore' or 'all' \(got 'al'\); "
        r"did you mean 'all'\?",
    ):
        load_options(conf_dir=str(tmp_path))


def test_without_an_action_log_all_records_nothing_and_runs_the_same():
    local = LocalRunner(
        AuditAgent, options=AgentOptions(action_log="none", action_log_record="all")
    )
    assert local.engine.journal is None and not local.engine.records_all
    assert run_all(local, RECORDS + PROBES)[-1] == {
        "key": "k1",
        "memory": {"count": 4, "notes": {"last": 7, "odd": True}},
    }


def test_with_all_the_log_of_a_chat_agent_holds_no_api_key(tmp_path, monkeypatch, llm_server):
    """The model's key is resolved from the environment inside its resource: recording
    every action (the built-in chat action's sensory memory, the request and response
    events) puts nothing of it in the log, nor in what ``history`` shows."""
    from flink_agents.testing.llm_server import Rule
    from tests.integrations.chat_agents import WeatherAgent

    secret = "sk-record-all-do-not-leak-5151"
    monkeypatch.setenv("TEST_LLM_URL", llm_server.base_url)
    monkeypatch.setenv("TEST_LLM_KEY", secret)
    llm_server.add_rule(Rule(reply_text="It is sunny."))
    path = tmp_path / "log.db"
    journal = ActionJournal(open_action_log(path), "job-1")
    local = LocalRunner(
        WeatherAgent, journal=journal, options=AgentOptions(action_log_record="all")
    )
    assert local.run("ana", "weather in Lisbon?")[0]["text"] == "It is sunny."
    journal.flush()
    with open_action_log(path) as log:
        history = key_history(log, "job-1", "ana")
        actions = [a.identity.action for run in history.runs for a in run.actions]
        assert actions == ["ask", "chat_model_action", "answer"]
        assert secret not in repr(history.to_json())
    local.engine.close()
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("log.db"))
    assert b"Lisbon" in stored  # the log does hold the run's data
    assert secret.encode() not in stored
