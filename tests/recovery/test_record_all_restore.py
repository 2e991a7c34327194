"""Recovery with ``action-log-record: all`` in MiniCluster (thread mode): the job of
``test_minicluster_failure.py`` fails twice mid-stream, with a third, plain action that only
changes short-term memory. Every action is recorded, so after each restore the replayed runs
apply every action's recorded changes instead of running it: outputs exactly once, the same
final memory as a run without failure, no recorded paid call made again, and a history that
shows every run's actions, the plain one with its changes."""

from __future__ import annotations

import json

import pytest
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents.plan import to_plan
from flink_agents.runtime.action_log import key_history, open_action_log
from flink_agents.runtime.flink import JobPaths, build_agent_job, read_json_files
from flink_agents.testing.recovery import check_recovery, expected_memory, read_ledger
from tests.recovery.checkpoints import bounded_checkpoints, execute
from tests.recovery.test_minicluster_failure import (
    FAIL_AFTER_CALLS,
    RECORDS,
    assert_repeats_are_unrecorded_calls_only,
    final_memory,
)
from tests.runtime.record_all_agents import AuditedLedgerAgent

pytestmark = [pytest.mark.slow, pytest.mark.flink]

JOB = "record-all-recovery"


def expected_audited_memory() -> dict:
    memory = expected_memory(RECORDS)
    for record in RECORDS:
        user = memory[record["user"]]
        user["audited"] = user.get("audited", 0) + 1
        user["last_audit"] = record["id"]
    return memory


def test_a_restored_job_with_all_replays_every_action_and_pays_no_recorded_call_again(tmp_path):
    data = tmp_path / "input.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    ledger = tmp_path / "ledger.jsonl"
    plan = to_plan(AuditedLedgerAgent).model_copy(
        update={
            "config": {"ledger": str(ledger), "delay_s": 0.05, "fail_after_calls": FAIL_AFTER_CALLS}
        }
    )
    config = bounded_checkpoints()
    config.set_string("restart-strategy.type", "fixed-delay")
    config.set_string("restart-strategy.fixed-delay.attempts", str(len(FAIL_AFTER_CALLS) + 1))
    config.set_string("restart-strategy.fixed-delay.delay", "100 ms")
    config.set_string("python.execution-mode", "thread")
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(2)
    out = tmp_path / "out"
    log_path = tmp_path / "log.db"
    build_agent_job(
        env,
        plan,
        JobPaths(data, out / "outputs", out / "errors", out / "memory"),
        "user",
        checkpoint_interval_ms=1000,
        memory_snapshots=True,
        action_log=f"sqlite://{log_path}",
        action_log_job=JOB,
        action_log_record="all",
    )
    execute(env, "record-all-recovery")
    for threshold in FAIL_AFTER_CALLS:  # the failures did happen
        assert (tmp_path / f"failed-after-{threshold}").exists()

    outputs, snapshots = read_json_files(out / "outputs"), read_json_files(out / "memory")
    calls = read_ledger(ledger)
    report = check_recovery(RECORDS, outputs, calls)
    assert report.ok, report  # no call whose result was recorded ran again
    assert (report.lost, report.duplicated, report.outputs) == (0, 0, len(RECORDS))
    assert_repeats_are_unrecorded_calls_only(report, calls)
    assert final_memory(snapshots) == expected_audited_memory()

    with open_action_log(log_path) as log:
        for user in sorted({r["user"] for r in RECORDS}):
            ids = [r["id"] for r in RECORDS if r["user"] == user]
            history = key_history(log, JOB, user)
            assert [run.run_sequence for run in history.runs] == list(range(1, len(ids) + 1))
            for run, record_id in zip(history.runs, ids, strict=True):
                completed = {a.identity.action: a for a in run.actions if a.completed}
                assert set(completed) == {"charge", "notify", "audit"}, (user, run)
                audit = {c.path: c.value for c in completed["audit"].memory if c.op == "set"}
                assert audit["last_audit"] == record_id
