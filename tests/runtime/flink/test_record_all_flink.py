"""``action-log-record: all`` on MiniCluster: the same outputs and final memory as the
default and as the local runner, and a history that lists every action of every run,
the plain ones with their memory changes (``tests/runtime/test_record_all.py`` has the
local runner's cases)."""

from __future__ import annotations

from collections import defaultdict

import pytest

from flink_agents.runtime.action_log import key_history, open_action_log
from tests.runtime.flink.runners import MODES, Pipeline, run_flink, run_local
from tests.runtime.record_all_agents import AuditAgent

pytestmark = pytest.mark.flink

RECORDS = [{"k": f"k{n % 3}", "n": n} for n in range(12)] + [
    {"k": f"k{k}", "probe": True} for k in range(3)
]


def pipeline(record: str) -> Pipeline:
    return Pipeline(
        f"audit-{record}",
        AuditAgent,
        RECORDS,
        options={
            "action_log": "sqlite://{dir}/log.db",
            "action_log_job": f"audit-{record}",
            "action_log_record": record,
        },
    )


def per_key(outputs: list) -> dict:
    by_key = defaultdict(list)
    for output in outputs:
        by_key[output["key"]].append(output)
    return dict(by_key)


@pytest.mark.parametrize("mode", MODES)
def test_all_on_minicluster_records_every_action_with_the_same_results(mode, tmp_path):
    pipelines = [pipeline("restore"), pipeline("all")]
    flink = run_flink(pipelines, tmp_path / "flink", mode, probe_mode=False)
    local = run_local(pipeline("all"), tmp_path / "local")
    restore, record_all = flink["audit-restore"], flink["audit-all"]
    assert restore.failure is None and record_all.failure is None, record_all.failure
    assert per_key(record_all.outputs) == per_key(restore.outputs) == per_key(local.outputs)
    assert per_key(record_all.outputs)["k1"][-1] == {  # the probe: final memory
        "key": "k1",
        "memory": {"count": 4, "notes": {"last": 10, "odd": False}},
    }

    with open_action_log(tmp_path / "flink" / "audit-all" / "log.db") as log:
        history = key_history(log, "audit-all", "k1")
        runs = {run.run_sequence: run.actions for run in history.runs}
        assert sorted(runs) == [1, 2, 3, 4, 5]  # four records and the probe
        for sequence in range(1, 5):
            assert [a.identity.action for a in runs[sequence]] == ["tally", "note", "answer"]
        notes = [a for run in history.runs for a in run.actions if a.identity.action == "note"]
        # n = 1, 4, 7, 10: ``note`` sets notes.last (and notes.odd, or deletes it)
        assert [
            [(c.op, c.path, c.value) for c in a.memory if c.op in ("set", "delete")] for a in notes
        ] == [
            [("set", "notes.last", 1), ("set", "notes.odd", True)],
            [("set", "notes.last", 4), ("set", "notes.odd", False)],
            [("set", "notes.last", 7), ("set", "notes.odd", True)],
            [("set", "notes.last", 10), ("set", "notes.odd", False)],
        ]
        assert [a.identity.action for a in runs[5]] == ["tally"]  # the probe's run
    with open_action_log(tmp_path / "flink" / "audit-restore" / "log.db") as log:
        history = key_history(log, "audit-restore", "k1")
        assert [[a.identity.action for a in run.actions] for run in history.runs] == [
            ["answer"]
        ] * 4
