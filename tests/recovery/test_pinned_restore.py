"""A pinned job restored from a savepoint still replays after the log expired a day of short
jobs (issue 39): expiring other jobs' records must never take what a restore can need.

Three submissions of the ledger agent under one pinned ``action-log-job``, with the default
action log (SQLite under the data directory), each a MiniCluster job in a child process
(``pinned_job.py``): the first reads batch 1 and is stopped with a savepoint; the second,
restored from it, reads batch 2 (its paid calls recorded in the log) and is cancelled. Then
many short jobs with generated names use the same log, with a clock a month on, each
expiring what it may when it starts. The third submission is restored from the same
savepoint, so it reads batch 2 again: every paid call of it must be answered from the log
(the ledger, outside the job, shows each call made once) and its outputs must be the
second submission's.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from flink_agents.memory import MemoryDelta
from flink_agents.runtime import ActionJournal
from flink_agents.runtime.action_log import open_action_log
from flink_agents.runtime.flink import read_json_files
from flink_agents.testing.recovery import check_recovery, read_ledger
from tests.children import run_child_job

pytestmark = [pytest.mark.slow, pytest.mark.flink]

JOB = "pinned-restore-agent"
MONTH_MS = 30 * 86_400_000
BATCH_1 = [{"id": i, "user": f"u{i % 4}", "amount": i % 7 + 1} for i in range(12)]
BATCH_2 = [{"id": i, "user": f"u{i % 4}", "amount": i % 7 + 1} for i in range(12, 24)]


def submit(
    tmp_path: Path, name: str, savepoint: str | None, stop: str, batches: list[dict[str, Any]]
) -> str | None:
    """Run one submission in a child process; the savepoint it was stopped with."""
    spec = {
        "job": JOB,
        "savepoint": savepoint,
        "savepoint_dir": (tmp_path / "savepoints").as_uri(),
        "stop": stop,
        "input_dir": str(tmp_path / "input"),
        "output_dir": str(tmp_path / f"out-{name}"),
        "data_dir": str(tmp_path / "data"),
        "ledger": str(tmp_path / "ledger.jsonl"),
        "batches": batches,
    }
    spec_file = tmp_path / f"{name}.json"
    spec_file.write_text(json.dumps(spec))
    return run_child_job("tests.recovery.pinned_job", spec_file, f"submission {name}")["savepoint"]


def short_generated_jobs(url: str, count: int, now_ms: int) -> None:
    """``count`` short jobs with generated names on the log at ``url``, each recording a few
    actions, as a developer's test runs would; each expires what it may as it starts."""
    for n in range(count):
        clock = lambda n=n: now_ms + n * 60_000  # noqa: E731 - one reading per job
        job = uuid.uuid4().hex
        journal = ActionJournal(open_action_log(url), job, clock=clock, generated_name=True)
        for step in range(3):
            memory = MemoryDelta(puts={"n": n})
            journal.complete(journal.identity("k", 1, step, "act"), MemoryDelta(), memory, (), ())
        journal.close()


def test_a_pinned_job_restored_from_a_savepoint_skips_its_recorded_calls_after_expiry(
    tmp_path: Path,
) -> None:
    (tmp_path / "input").mkdir()
    batch_1 = {"file": "batch-1.jsonl", "records": BATCH_1}
    batch_2 = {"file": "batch-2.jsonl", "records": BATCH_2}
    savepoint = submit(tmp_path, "first", None, "savepoint", [batch_1])
    assert savepoint
    submit(tmp_path, "second", savepoint, "cancel", [batch_2])
    ledger = read_ledger(tmp_path / "ledger.jsonl")
    assert len(ledger) == 2 * (len(BATCH_1) + len(BATCH_2))  # two paid calls per record

    url = f"sqlite://{(tmp_path / 'data' / 'action-log.db').resolve()}"
    with open_action_log(url) as log:
        pinned = log.count(JOB)
        last_written = max(s.newest_ms or 0 for s in log.job_summaries())
    assert pinned > 0
    short_generated_jobs(url, 50, last_written + MONTH_MS)
    with open_action_log(url) as log:
        jobs = {s.job: s for s in log.job_summaries()}
        assert log.count(JOB) == pinned  # a month unseen, and kept: its name is pinned
    assert len(jobs) <= 1 + 11  # the pinned job; the generated ones of the last ten minutes

    submit(tmp_path, "third", savepoint, "cancel", [batch_2])
    replayed = read_json_files(tmp_path / "out-third")
    # Not one paid call made again (with the pinned job expired, all 24 of batch 2 were).
    assert read_ledger(tmp_path / "ledger.jsonl") == ledger
    report = check_recovery(BATCH_2, replayed, ledger)
    assert report.reexecuted_after_record == 0 and report.repeated_calls == 0, report
    assert report.lost == 0 and report.duplicated == 0, report
    first_time = {o["id"]: o for o in read_json_files(tmp_path / "out-second")}
    assert {o["id"]: (o["charge"], o["notify"]) for o in replayed} == {
        i: (o["charge"], o["notify"]) for i, o in first_time.items()
    }
