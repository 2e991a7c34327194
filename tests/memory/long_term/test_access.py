"""Reads are recorded in batches: many searches cost one background rewrite per set."""

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
