"""Recovery from real failures: ``kill -9`` of the TaskManager (JVM and Python worker) of a
standalone cluster, three times mid-stream, with the action log on a real PostgreSQL server.

Each kill waits until the job checkpointed since the previous one and the ledger grew, then a
new TaskManager is started and the job restarts from its last checkpoint. Unlike the
MiniCluster test, a kill can interrupt a durable call between its side effect and the log
write: such a call runs again (``repeated_calls``), at most once per kill.
"""

from __future__ import annotations

import pytest

from flink_agents.testing.torture import TortureResult, TortureSpec, run_torture, torture_cluster

pytestmark = [pytest.mark.slow, pytest.mark.flink]

SPEC = TortureSpec(records=400, users=8, kills=3, delay_s=0.05)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = torture_cluster(tmp_path_factory.mktemp("kill-cluster"))
    cluster.start()
    yield cluster
    cluster.stop()
    assert cluster.taskmanager_pids() == []


def describe(result: TortureResult) -> str:
    kills = ", ".join(
        f"{k.at_s:.0f} s (ledger {k.ledger_lines}, recovered in {k.recovered_s} s)"
        for k in result.kills
    )
    return f"job {result.state} after {result.elapsed_s:.0f} s; kills: {kills}; {result.report}"


def test_kill_9_taskmanagers_mid_stream(cluster, postgres_server, tmp_path, record_property):
    result = run_torture(cluster, tmp_path, postgres_server.create_database(), SPEC, print)
    report = result.report
    record_property("repeated_calls", report.repeated_calls)
    print(describe(result))
    logs = f"cluster logs: {cluster.log_dir}"

    # KNOWN BUG (runtime, see the integration notes): after a restore, the Python worker
    # unpickles the job's functions on several threads at once; importing
    # flink_agents.runtime.flink._job and ._dispatcher concurrently deadlocks on the import
    # locks (the package __init__ imports its submodules) -> _DeadlockError, the job fails
    # on every restart and never finishes. Fails here, with `state` RESTARTING/RUNNING.
    assert result.finished, f"the job did not recover: {describe(result)}; {logs}"
    assert len(result.kills) >= SPEC.kills, f"the stream ended too soon: {describe(result)}"

    # KNOWN BUG (runtime, intermittent): a key whose run was parked when a checkpoint was
    # taken can be restored without its timers; its run never resumes and its later inputs
    # wait behind it forever: its outputs are lost and its memory is short.
    assert (report.lost, report.duplicated) == (0, 0), describe(result)
    assert report.outputs == SPEC.records
    assert result.memory_equal, "final short-term memory differs from a run without failure"

    assert report.reexecuted_after_record == 0, "a completed call ran again after a restart"
    assert report.repeated_calls <= len(result.kills), describe(result)
    assert report.sensory_mismatches == 0
    assert result.errors == []
