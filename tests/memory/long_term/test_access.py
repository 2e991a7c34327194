"""Reads are recorded in batches: many searches cost one background rewrite per set."""

import time

import pytest

from flink_agents.memory.long_term._access import AccessRecorder


def test_reads_gather_into_one_background_write_per_set():
    touched: list[tuple[str, str, list[str]]] = []
    jobs: list = []
    recorder = AccessRecorder(lambda k, n, ids: touched.append((k, n, ids)), jobs.append, 0)
    for n in range(100):
        recorder.record("ana", "notes", [f"id-{n % 7}", "id-x"])
    recorder.record("bo", "notes", ["id-b"])
    assert len(jobs) == 1  # one job queued for all 101 reads, nothing written yet
    assert touched == []
    jobs.pop()()
    assert sorted(touched) == [
        ("ana", "notes", ["id-0", "id-x", "id-1", "id-2", "id-3", "id-4", "id-5", "id-6"]),
        ("bo", "notes", ["id-b"]),
    ]
    recorder.record("ana", "notes", ["id-9"])  # after a flush, the next read queues again
    assert len(jobs) == 1


def test_flush_writes_what_is_gathered_now():
    touched = []
    recorder = AccessRecorder(lambda k, n, ids: touched.append(ids), lambda job: None, 60)
    recorder.record("ana", "notes", ["a", "b"])
    recorder.flush()
    assert touched == [["a", "b"]]


def test_background_write_pauses_between_sets_within_half_an_interval():
    """The background job pauses after each set but the last (handing the cores back to
    searches), ``pace`` times as long as the set took, and its pauses add up to at most
    half the interval."""
    touched: list[str] = []
    jobs: list = []

    def slow_touch(key: str, name: str, ids: list[str]) -> None:
        touched.append(key)
        busy = time.perf_counter() + 0.002  # a set's write takes about 2 ms
        while time.perf_counter() < busy:
            pass

    for interval, pauses_expected in ((1.0, 4), (0.01, 1)):
        touched.clear()
        pauses: list[float] = []
        recorder = AccessRecorder(slow_touch, jobs.append, interval, pace=3, sleep=pauses.append)
        for n in range(5):
            recorder.record(f"k{n}", "notes", ["a"])
        jobs.pop()()
        assert touched == ["k0", "k1", "k2", "k3", "k4"]
        assert len(pauses) == pauses_expected
        assert all(p >= 3 * 0.002 or p == interval / 2 for p in pauses)
        assert sum(pauses) <= interval / 2


def test_flush_and_pace_zero_never_pause():
    pauses: list[float] = []
    jobs: list = []
    recorder = AccessRecorder(lambda k, n, ids: None, jobs.append, 0, pace=0, sleep=pauses.append)
    recorder.record("a", "notes", ["x"])
    recorder.record("b", "notes", ["y"])
    jobs.pop()()
    paced = AccessRecorder(lambda k, n, ids: None, jobs.append, 60, sleep=pauses.append)
    paced.record("a", "notes", ["x"])
    paced.record("b", "notes", ["y"])
    paced.flush()  # an explicit flush (close) writes at once
    assert pauses == []


def test_negative_pace_is_refused():
    with pytest.raises(ValueError):
        AccessRecorder(lambda k, n, ids: None, lambda job: None, pace=-1)
