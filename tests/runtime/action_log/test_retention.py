"""Retention across jobs (issue 39), through the journal: every attempt marks its job and
expires those no restore can need when it starts (the rule itself is specified in
test_conformance.py), its heartbeat keeps its own job, and a log shared by many short jobs
stays bounded. Every spec runs on every backend."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest

from flink_agents._ids import key_text
from flink_agents.memory import MemoryDelta
from flink_agents.runtime.action_log import (
    ActionLog,
    DurableCall,
    JobMarker,
    JobSummary,
)
from flink_agents.runtime.journal import ActionJournal
from tests.runtime.action_log.conftest import Backend
from tests.runtime.action_log.records import ident


def summaries(log: ActionLog) -> dict[str, JobSummary]:
    return {summary.job: summary for summary in log.job_summaries()}


class Clock:
    """Milliseconds that move only when told, read from any thread."""

    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def short_job(backend: Backend, clock: Clock, *, pinned: str | None = None, size: int = 0) -> str:
    """A job that records a few actions and ends, as a test run or a demo does."""
    job = pinned or uuid.uuid4().hex
    journal = ActionJournal(
        backend.open(), job, retention_ms=600_000, clock=clock, generated_name=pinned is None
    )
    for step in range(4):
        memory = MemoryDelta(puts={"note": "p" * size})
        journal.complete(journal.identity("k1", 1, step, "act"), MemoryDelta(), memory, (), ())
    journal.close()
    return job


def test_a_day_of_short_jobs_leaves_a_bounded_log(backend: Backend) -> None:
    """A short job every five minutes for a day (10-minute windows): the log holds the jobs
    seen within the last window and the pinned one, never the day's."""
    clock = Clock()
    pinned = short_job(backend, clock, pinned="my-agent")
    reader, most = backend.open(), 0
    for _ in range(24 * 12):
        clock.now += 300_000
        short_job(backend, clock)
        backend.opened.pop().close()  # the job's log, closed by its journal already
        most = max(most, len(reader.job_summaries()))
    jobs = summaries(reader)
    assert most == len(jobs) == 1 + 3  # the pinned one; those that ran 0 to 10 minutes ago
    assert jobs[pinned].records == 4


def test_a_pinned_job_outlives_any_number_of_expired_ones(backend: Backend) -> None:
    clock = Clock()
    short_job(backend, clock, pinned="my-agent")
    for _ in range(50):
        clock.now += 10**9
        short_job(backend, clock)
    log = backend.open()
    assert log.count("my-agent") == 4
    assert log.run_index("my-agent") == {key_text("k1"): 1}


def test_a_running_job_is_kept_alive_by_its_heartbeat(backend: Backend) -> None:
    """An attempt that writes nothing for longer than its window (no input, or a call
    slower than the window) keeps its records: it marks itself every quarter window."""
    clock = Clock()
    log = backend.open()
    job = uuid.uuid4().hex
    journal = ActionJournal(log, job, retention_ms=40, clock=clock, generated_name=True)
    log.record_call(ident(job=job), DurableCall(0, "llm", "d0", "r"), clock())
    try:
        clock.now += 10_000
        wait_until(lambda: summaries(log)[job].marker.seen_ms == clock.now)
        assert backend.open().expire_jobs(clock.now + 39) == {}
        assert log.count(job) == 1
    finally:
        journal.close()
    clock.now += 41
    assert backend.open().expire_jobs(clock.now) == {job: 1}  # closed: no more beats


def test_a_journal_marks_its_job_generated_or_pinned(backend: Backend) -> None:
    clock = Clock()
    generated = short_job(backend, clock)
    short_job(backend, clock, pinned="my-agent")
    found = summaries(backend.open())
    assert found[generated].marker == JobMarker(generated, True, 600_000, clock.now)
    assert found["my-agent"].marker == JobMarker("my-agent", False, 600_000, clock.now)


def wait_until(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail("the condition never held")
        time.sleep(0.005)
