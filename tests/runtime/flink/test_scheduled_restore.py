"""Scheduled events, sleeping runs and runs waiting for a signal survive a stop with a
savepoint and a failure, and fire (wake, or are answered) once.

A child process (``scheduled_restore_job.py``) schedules a reminder per key, stops the job
with a savepoint before any is due, restores it, fails it once after a checkpoint while the
reminders are still pending, and waits for them. Every output is committed exactly once, so
each reminder must appear once, with the key's memory of one reminder. A run per key sleeps
(``ctx.sleep``) across the same savepoint, another across the failure: each wakes once. A
run per key waits for an ``Approval`` (``ctx.wait_for``) from a second stream
(``with_signals``): two are answered after the savepoint, the third after the failure too. In
thread mode the restored timers fire them; in process mode (which restores no Python timer)
each key's next record does, once they are due (``docs/waiting.md``).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from flink_agents.runtime.flink import read_json_files
from tests.children import run_child_job
from tests.runtime.flink.runners import MODES

pytestmark = [pytest.mark.slow, pytest.mark.flink]

DELAY_S = 10.0
"""How far ahead the first plans' reminders are scheduled: past the stop with a savepoint."""
LATE_DELAY_S = 8.0
"""How far ahead the restored job's late plans schedule theirs: past the failure."""


SCALES = (1.0, 3.0)
"""The delays' scales tried in turn: the test's premise (the stop and the failure before the
reminders are due) depends on how fast a loaded machine checkpoints and stops a job, so a run
that missed it proves nothing and is repeated once with longer delays."""


def _spec(mode: str, directory: Path, scale: float) -> dict[str, Any]:
    (directory / "input").mkdir(parents=True)
    (directory / "signals").mkdir()
    delay, late_delay = DELAY_S * scale, LATE_DELAY_S * scale
    plans = [
        {"id": i, "key": f"k{i % 3}", "kind": "plan", "delay_s": delay + i % 2} for i in range(6)
    ]
    late = [{"id": 10 + i, "key": f"k{i}", "kind": "plan", "delay_s": late_delay} for i in range(3)]
    naps = [{"key": f"k{i}", "kind": "nap"} for i in range(3)]
    plans += [{**nap, "id": 20 + i, "delay_s": delay} for i, nap in enumerate(naps)]
    late += [{**nap, "id": 30 + i, "delay_s": late_delay} for i, nap in enumerate(naps)]
    touches = [{"id": f"touch-{k}", "key": k, "kind": "touch"} for k in ("k0", "k1", "k2")]
    return {
        "mode": mode,
        "job": "scheduled-restore",
        "savepoint_dir": (directory / "savepoints").as_uri(),
        "input_dir": str(directory / "input"),
        "signals_dir": str(directory / "signals"),
        "output_dir": str(directory / "out"),
        "data_dir": str(directory / "data"),
        "marker": str(directory / "crashed"),
        "plans": plans,
        "late_plans": late,
        "asks": [{"id": 40 + i, "key": f"k{i}", "kind": "ask"} for i in range(3)],
        "signals_after_restore": [
            {"key": "k0", "n": 40, "ok": True},
            {"key": "k1", "n": 41, "ok": False},
        ],
        "signals_after_failure": [
            {"key": "k2", "n": 42, "ok": True},
            {"key": "k0", "n": 99, "ok": True},
        ],
        "unexpected": ["unexpected-99"],
        "crash": {"id": "crash", "key": "k0", "kind": "crash"},
        "touches": touches if mode == "process" else [],
    }


def _premise_held(spec: dict[str, Any], result: dict[str, float]) -> bool:
    """Whether the savepoint was taken, and the job failed, while the reminders (and naps)
    were pending: before the first of each batch was due, counted from when its record ran."""
    ran = {o["id"]: o["at"] for o in read_json_files(Path(spec["output_dir"])) if "at" in o}

    def first_due(records: list[dict[str, Any]]) -> float:
        return min(ran[r["id"]] + r["delay_s"] for r in records)

    return result["stopped_at"] < first_due(spec["plans"]) and result["failed_at"] < first_due(
        spec["late_plans"]
    )


@pytest.mark.parametrize("mode", MODES)
def test_reminders_pending_across_a_savepoint_and_a_failure_fire_once(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if mode == "process":
        monkeypatch.setenv("_python_worker_execution_mode", "process")
    results = []
    for attempt, scale in enumerate(SCALES):
        directory = tmp_path / f"attempt-{attempt}"
        spec = _spec(mode, directory, scale)
        spec_file = directory / "spec.json"
        spec_file.write_text(json.dumps(spec))
        results.append(run_child_job("tests.runtime.flink.scheduled_restore_job", spec_file, mode))
        if _premise_held(spec, results[-1]):
            break
    else:
        pytest.fail(f"the job stopped or failed after its reminders were due: {results}")
    plans, late = spec["plans"], spec["late_plans"]

    outputs = read_json_files(directory / "out")
    counted = Counter(o["id"] for o in outputs)
    reminders = {f"reminded-{p['id']}" for p in plans + late if p["kind"] == "plan"}
    wakings = {f"woke-{p['id']}" for p in plans + late if p["kind"] == "nap"}
    assert {i: n for i, n in counted.items() if n != 1} == {}  # exactly once
    assert reminders | wakings <= set(counted)
    # The first plans' outputs listed the reminders of their key pending by then.
    for output in outputs:
        if isinstance(output["id"], int) and output["id"] < 10:
            key = plans[output["id"]]["key"]
            mine = [
                p["id"]
                for p in plans
                if p["key"] == key and p["id"] <= output["id"] and p["kind"] == "plan"
            ]
            assert sorted(output["pending"]) == mine
    # Each key was reminded once per plan, counted in its memory.
    counts = sorted(o["count"] for o in outputs if str(o["id"]).startswith("reminded-"))
    assert counts == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    # Each ask got its own signal, after the savepoint or after the failure; the signal no
    # run waited for started a run of its own.
    answers = {o["id"]: o["answer"] for o in outputs if str(o["id"]).startswith("answered-")}
    assert answers == {
        "answered-40": [40, True],
        "answered-41": [41, False],
        "answered-42": [42, True],
    }
    assert counted["unexpected-99"] == 1
    # Each key woke twice, counted in its memory.
    counts = sorted(o["count"] for o in outputs if str(o["id"]).startswith("woke-"))
    assert counts == [1, 1, 1, 2, 2, 2]
