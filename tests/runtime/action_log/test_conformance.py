"""The conformance suite: one spec per ``ActionLog`` operation, run against every backend."""

from __future__ import annotations

import dataclasses
import threading
import uuid
from typing import Any

import pytest

from flink_agents.memory import MemoryDelta, ObjectMarker
from flink_agents.runtime.action_log import (
    ActionLog,
    ActionRecord,
    DurableCall,
    JobMarker,
    JobSummary,
    RecordedError,
    Spent,
    UnstorableValueError,
)
from tests.runtime.action_log.conftest import Backend
from tests.runtime.action_log.records import (
    Answer,
    KeywordOnlyError,
    NoteEvent,
    QuotaError,
    ScoreEvent,
    ident,
)

SENSORY = MemoryDelta(
    cleared=True,
    puts={"": ObjectMarker(("req",)), "req": ObjectMarker(("text",)), "req.text": "hi"},
)
SHORT_TERM = MemoryDelta(
    cleared=False,
    puts={
        "": ObjectMarker(("answer", "history")),
        "answer": Answer(text="42", confidence=0.9),
        "history": [{"role": "user", "content": "hi"}, None, 1.5, b"raw"],
    },
    removals=("stale", "stale.x"),
)


def record(identity=None, *, epoch: int = 1, text: str = "done", calls=()) -> ActionRecord:
    """A completed record; its events have fixed ids so that equal calls give equal records."""
    identity = identity or ident()
    ids = [uuid.uuid5(uuid.NAMESPACE_OID, f"{identity}-{text}-{n}") for n in range(2)]
    return ActionRecord(
        identity=identity,
        sensory=SENSORY,
        short_term=SHORT_TERM,
        events=(
            NoteEvent(id=ids[0], text=text),
            ScoreEvent(id=ids[1], score=0.5, tags=["a", "b"]),
        ),
        calls=tuple(calls),
        epoch=epoch,
    )


def call(index: int, result: Any = None, *, function: str = "llm", digest: str = "d0"):
    return DurableCall(index=index, function=function, args_digest=digest, result=result)


def summary(calls: list[DurableCall]) -> list[tuple[int, str, str, Any]]:
    return [(c.index, c.function, c.args_digest, c.result) for c in calls]


def test_setup_is_idempotent(log: ActionLog, backend: Backend) -> None:
    """setup() may run again, also from another instance, without losing records."""
    log.complete(record())
    log.setup()
    backend.open().setup()
    assert log.completed(ident()) == record()


def test_completed_returns_none_for_unknown_identity(log: ActionLog) -> None:
    """completed() of an identity never recorded is None."""
    log.complete(record(ident(step=1)))
    assert log.completed(ident(step=2)) is None


def test_complete_round_trips_deltas_and_events(log: ActionLog) -> None:
    """complete() then completed() returns equal deltas (clears and markers) and events."""
    written = record(epoch=7)
    read = log.completed(ident())
    assert read is None
    log.complete(written)
    read = log.completed(ident())
    assert read == written
    assert read.sensory.cleared and read.short_term.removals == ("stale", "stale.x")
    assert type(read.sensory.puts["req"]) is ObjectMarker
    assert [e.id for e in read.events] == [e.id for e in written.events]
    assert [type(e) for e in read.events] == [NoteEvent, ScoreEvent]
    assert read.epoch == 7


def test_complete_round_trips_call_results_and_errors(log: ActionLog) -> None:
    """complete() keeps call results of several types and errors with type and message."""
    results = ["text", {"k": [1, 2]}, None, 3.25, b"\x00\xff", Answer(text="a", confidence=1.0)]
    calls = [call(i, r, digest=f"d{i}") for i, r in enumerate(results)]
    calls.append(DurableCall(len(calls), "tool", "dx", error=QuotaError("over quota")))
    calls.append(DurableCall(len(calls), "tool", "dy", error=ValueError("bad", 3)))
    log.complete(record(calls=calls))
    read = log.completed(ident()).calls
    assert summary(list(read[: len(results)])) == summary(calls[: len(results)])
    quota, value = read[-2].error, read[-1].error
    assert type(quota) is QuotaError and str(quota) == "over quota" and read[-2].result is None
    assert type(value) is ValueError and value.args == ("bad", 3)


def test_unreadable_error_is_stored_as_recorded_error(log: ActionLog) -> None:
    """An error pickle cannot read back is stored as a RecordedError with type and message."""
    failed = DurableCall(0, "tool", "d", error=KeywordOnlyError(code=7))
    log.record_call(ident(), failed, epoch=1)
    log.complete(record(ident(step=2), calls=[failed]))
    for read in (log.calls(ident())[0].error, log.completed(ident(step=2)).calls[0].error):
        assert type(read) is RecordedError
        assert read.type_name == f"{KeywordOnlyError.__module__}.KeywordOnlyError"
        assert read.message == "failed with code 7"


def test_unserializable_result_raises_and_records_nothing(log: ActionLog) -> None:
    """A result the serializer cannot handle raises UnstorableValueError, writes nothing."""
    with pytest.raises(UnstorableValueError, match="durable call 0"):
        log.record_call(ident(), call(0, lambda: None), epoch=1)
    with pytest.raises(UnstorableValueError, match="action 'act'"):
        log.complete(record(calls=[call(0, threading.Lock())]))
    assert log.calls(ident()) == [] and log.completed(ident()) is None
    assert log.count("job-1") == 0


def test_records_do_not_alias_caller_objects(log: ActionLog) -> None:
    """Changing an object after recording it does not change the log."""
    result = {"items": [1]}
    log.record_call(ident(), call(0, result), epoch=1)
    result["items"].append(2)
    assert log.calls(ident())[0].result == {"items": [1]}


def test_complete_overwrites(log: ActionLog) -> None:
    """Completing an identity again replaces its record and epoch."""
    log.complete(record(text="first", epoch=1))
    log.complete(record(text="second", epoch=2))
    read = log.completed(ident())
    assert read.events[0].text == "second" and read.epoch == 2
    assert log.count("job-1") == 1


def test_complete_many_writes_a_batch_like_complete(log: ActionLog, backend: Backend) -> None:
    """complete_many() stores every encoded record, in order (an identity completed twice
    in one batch keeps the later record), and drops the partial calls of each."""
    for step in (1, 2, 9):
        log.record_call(ident(step=step), call(0, f"partial-{step}"), epoch=1)
    batch = [
        log.encode(record(ident(step=1), text="first", epoch=2, calls=[call(0, "r")])),
        log.encode(record(ident(step=2), epoch=3)),
        log.encode(record(ident(key="k2", run=5), epoch=4)),
        log.encode(record(ident(step=1), text="again", epoch=5)),
    ]
    log.complete_many(batch)
    read = log.completed(ident(step=1))
    assert read == record(ident(step=1), text="again", epoch=5)
    assert log.completed(ident(step=2)) == record(ident(step=2), epoch=3)
    assert log.calls(ident(step=1)) == [] and log.calls(ident(step=2)) == []
    assert summary(log.calls(ident(step=9))) == [(0, "llm", "d0", "partial-9")]
    assert log.count("job-1") == 4
    assert log.run_index("job-1") == {"k1": 1, "k2": 5}
    assert backend.open().completed(ident(key="k2", run=5)) == record(
        ident(key="k2", run=5), epoch=4
    )


def test_complete_many_writes_large_batches(log: ActionLog) -> None:
    """Batches larger than a backend writes in one statement, with repeated identities
    (the later record wins) and partial calls to drop spread over them."""
    for step in range(0, 1050, 10):
        log.record_call(ident(step=step), call(0), epoch=1)
    log.record_call(ident(key="other"), call(0, "kept"), epoch=1)
    batch = [log.encode(record(ident(step=step), epoch=1)) for step in range(1050)]
    batch += [log.encode(record(ident(step=step), epoch=2)) for step in range(0, 1050, 21)]
    log.complete_many(batch)
    assert log.count("job-1") == 1051  # 1050 completed, one interrupted
    assert [log.completed(ident(step=s)).epoch for s in (0, 1, 21, 1049)] == [2, 1, 2, 1]
    assert all(log.calls(ident(step=step)) == [] for step in range(0, 1050, 10))
    assert summary(log.calls(ident(key="other"))) == [(0, "llm", "d0", "kept")]


def test_complete_many_of_nothing_writes_nothing(log: ActionLog) -> None:
    log.complete_many([])
    assert log.count("job-1") == 0


def test_encode_fails_on_unstorable_values_and_writes_nothing(log: ActionLog) -> None:
    """encode() serializes on the caller's thread: an unstorable value raises there."""
    with pytest.raises(UnstorableValueError, match="action 'act'"):
        log.encode(record(calls=[call(0, threading.Lock())]))
    encoded = log.encode(record(epoch=6))
    assert (encoded.identity, encoded.epoch) == (ident(), 6)
    assert isinstance(encoded.payload, bytes)
    assert log.count("job-1") == 0  # encoding writes nothing


def test_a_failing_batch_writes_none_of_it(log: ActionLog, backend: Backend) -> None:
    """One transaction: a row the store rejects (a missing payload) leaves the log as it
    was, the records before it and the calls it would have dropped included."""
    if backend.name == "memory":
        pytest.skip("the in-memory log stores whatever it is given")
    log.record_call(ident(step=1), call(0, "partial"), epoch=1)
    good = log.encode(record(ident(step=1)))
    bad = log.encode(record(ident(step=2)))._replace(payload=None)
    with pytest.raises(Exception):  # noqa: B017 - the driver's own integrity error
        log.complete_many([good, bad])
    assert log.completed(ident(step=1)) is None
    assert summary(log.calls(ident(step=1))) == [(0, "llm", "d0", "partial")]
    assert log.count("job-1") == 1
    log.complete_many([good])  # the log still works
    assert log.completed(ident(step=1)) == record(ident(step=1))


def test_record_call_then_calls_in_order(log: ActionLog) -> None:
    """record_call() entries come back from calls() in index order."""
    assert log.calls(ident()) == []
    for i in range(4):
        log.record_call(ident(), call(i, f"r{i}", digest=f"d{i}"), epoch=1)
    assert summary(log.calls(ident())) == [(i, "llm", f"d{i}", f"r{i}") for i in range(4)]
    assert log.completed(ident()) is None


def test_record_call_overwrite_drops_later_calls(log: ActionLog) -> None:
    """record_call() at an existing index replaces it and drops every later index."""
    for i in range(4):
        log.record_call(ident(), call(i, f"r{i}"), epoch=1)
    log.record_call(ident(), call(1, "fixed", function="tool", digest="new"), epoch=1)
    assert summary(log.calls(ident())) == [(0, "llm", "d0", "r0"), (1, "tool", "new", "fixed")]


def test_record_calls_stores_a_group_as_record_call_would_one_by_one(log: ActionLog) -> None:
    """record_calls() (the journal's group commit) leaves what record_call() in order would:
    new identities, an identity's next call, and an overwrite that drops later calls; more
    calls than one multi-row statement holds; partial calls of one action pruned together."""
    for i in range(3):
        log.record_call(ident(step=1), call(i, f"old{i}"), epoch=1)
    log.record_call(ident(step=2), call(0, "first"), epoch=1)
    group = [
        log.encode_call(ident(step=1), call(1, "fixed", digest="new"), 5),
        log.encode_call(ident(step=2), call(1, "second"), 5),
        *(log.encode_call(ident(step=100 + n), call(0, f"n{n}"), 5) for n in range(200)),
    ]
    log.record_calls(group)
    assert summary(log.calls(ident(step=1))) == [
        (0, "llm", "d0", "old0"),
        (1, "llm", "new", "fixed"),
    ]
    assert summary(log.calls(ident(step=2))) == [
        (0, "llm", "d0", "first"),
        (1, "llm", "d0", "second"),
    ]
    assert [summary(log.calls(ident(step=100 + n))) for n in (0, 99, 199)] == [
        [(0, "llm", "d0", f"n{n}")] for n in (0, 99, 199)
    ]
    assert log.count("job-1") == 202
    assert log.prune("job-1", before_epoch=5) == 0  # the earlier calls took the group's epoch
    log.record_calls([])
    assert log.count("job-1") == 202


def test_groups_of_every_size_around_one_statement_are_written_whole(log: ActionLog) -> None:
    """record_calls() and complete_many() store each of 1 to 17 entries once, whether the
    backend writes a group as it is or pads it to a statement size of its own."""
    sizes = range(1, 18)
    for size in sizes:
        log.record_calls(
            [log.encode_call(ident(key=f"c{size}", step=n), call(0, n), 1) for n in range(size)]
        )
        log.complete_many([log.encode(record(ident(key=f"r{size}", step=n))) for n in range(size)])
    for size in sizes:
        assert [summary(log.calls(ident(key=f"c{size}", step=n))) for n in range(size)] == [
            [(0, "llm", "d0", n)] for n in range(size)
        ]
        for n in range(size):
            identity = ident(key=f"r{size}", step=n)
            assert log.completed(identity) == record(identity)
    assert log.count("job-1") == 2 * sum(sizes)


def test_fresh_calls_are_stored_as_any_other(log: ActionLog) -> None:
    """Calls marked fresh (no earlier call of their action at or above their index) are
    stored as record_call() stores them: a group of first calls (one statement in SQLite)
    and a group with an action's next call, whose earlier call takes the group's epoch."""
    firsts = [log.encode_call(ident(step=n), call(0, f"a{n}"), 1, fresh=True) for n in range(3)]
    log.record_calls(firsts)
    log.record_calls(
        [
            log.encode_call(ident(step=0), call(1, "b"), 2, fresh=True),
            log.encode_call(ident(step=9), call(0, "c"), 2, fresh=True),
        ]
    )
    assert summary(log.calls(ident(step=0))) == [(0, "llm", "d0", "a0"), (1, "llm", "d0", "b")]
    assert summary(log.calls(ident(step=2))) == [(0, "llm", "d0", "a2")]
    assert summary(log.calls(ident(step=9))) == [(0, "llm", "d0", "c")]
    assert log.count("job-1") == 4
    assert log.prune("job-1", before_epoch=2) == 2  # steps 1 and 2; step 0's calls took 2
    assert summary(log.calls(ident(step=0)))[1] == (1, "llm", "d0", "b")


def test_complete_removes_partial_calls(log: ActionLog) -> None:
    """complete() deletes the identity's partial calls (they live on in the record)."""
    calls = [call(0, "r0"), call(1, "r1")]
    for c in calls:
        log.record_call(ident(), c, epoch=1)
    log.record_call(ident(step=2), call(0, "other"), epoch=1)
    log.complete(record(calls=calls))
    assert log.calls(ident()) == []
    assert summary(list(log.completed(ident()).calls)) == summary(calls)
    assert summary(log.calls(ident(step=2))) == [(0, "llm", "d0", "other")]


def test_prune_removes_only_older_epochs_of_the_job(log: ActionLog) -> None:
    """prune() deletes the job's records and partial calls below the epoch, returns the count."""
    for epoch in (1, 2, 3):
        log.complete(record(ident(step=epoch), epoch=epoch))
        log.complete(record(ident(job="job-2", step=epoch), epoch=epoch))
    log.record_call(ident(step=10), call(0), epoch=1)
    log.record_call(ident(step=11), call(0), epoch=3)
    before = log.count("job-1")
    assert log.prune("job-1", before_epoch=3) == 3
    assert log.count("job-1") == before - 3
    assert [log.completed(ident(step=s)) is not None for s in (1, 2, 3)] == [False, False, True]
    assert log.calls(ident(step=10)) == [] and len(log.calls(ident(step=11))) == 1
    assert log.count("job-2") == 3
    assert log.prune("job-1", before_epoch=3) == 0


def test_partial_calls_of_an_action_are_pruned_together(log: ActionLog) -> None:
    """Partial calls of one action take its latest epoch, so prune never leaves a hole."""
    log.record_call(ident(), call(0, "r0"), epoch=1)
    log.record_call(ident(), call(1, "r1"), epoch=2)
    assert log.prune("job-1", before_epoch=2) == 0
    assert summary(log.calls(ident())) == [(0, "llm", "d0", "r0"), (1, "llm", "d0", "r1")]
    assert log.prune("job-1", before_epoch=3) == 1
    assert log.calls(ident()) == []


def test_count(log: ActionLog) -> None:
    """count() is the job's completed plus interrupted actions."""
    assert log.count("job-1") == 0
    log.complete(record(ident(step=1)))
    log.complete(record(ident(step=2)))
    log.record_call(ident(step=3), call(0), epoch=1)
    log.record_call(ident(step=3), call(1), epoch=1)
    log.complete(record(ident(job="job-2")))
    assert log.count("job-1") == 3
    assert log.count("job-2") == 1
    assert log.count("job-3") == 0


def test_jobs_and_keys_are_isolated(log: ActionLog) -> None:
    """Records of one job or key are never seen under another."""
    log.complete(record(ident(job="a", key="k1"), text="a-k1"))
    log.record_call(ident(job="a", key="k1", step=2), call(0, "a-k1"), epoch=1)
    for other in (ident(job="b", key="k1"), ident(job="a", key="k2")):
        assert log.completed(other) is None
        assert log.calls(dataclasses.replace(other, step=2)) == []
    assert log.prune("b", before_epoch=100) == 0
    assert log.completed(ident(job="a", key="k1")).events[0].text == "a-k1"


def test_forget_key_removes_one_keys_records_and_calls_in_every_job(log: ActionLog) -> None:
    for job in ("a", "b"):
        for key in ("k1", "k2"):
            log.complete(record(ident(job=job, key=key), text=f"{job}-{key}"))
            log.record_call(ident(job=job, key=key, step=2), call(0, "x"), epoch=1)
            log.record_call(ident(job=job, key=key, step=2), call(1, "y"), epoch=1)
    # Two jobs, each one completed action and one interrupted one (its two calls).
    assert log.forget_key("k1") == 4
    for job in ("a", "b"):
        assert log.key_records(job, "k1") == log.key_interrupted(job, "k1") == []
        assert log.completed(ident(job=job, key="k2")).events[0].text == f"{job}-k2"
        assert len(log.calls(ident(job=job, key="k2", step=2))) == 2
        assert log.run_index(job) == {"k2": 1}
    assert log.forget_key("k1") == 0


def test_spend_adds_up_per_scope_and_window_and_drops_earlier_windows(log: ActionLog) -> None:
    assert log.spend("agent/daily", 1000) == Spent()
    assert log.add_spend("agent/daily", 1000, Spent(10, 0.5, 1)) == Spent(10, 0.5, 1)
    assert log.add_spend("agent/daily", 1000, Spent(5, 0.25, 1)) == Spent(15, 0.75, 2)
    assert log.add_spend("agent/hourly", 1000, Spent(1, 0.0, 1)) == Spent(1, 0.0, 1)
    assert log.spend("agent/daily", 1000) == Spent(15, 0.75, 2)
    assert log.add_spend("agent/daily", 2000, Spent(3, 0.125, 1)) == Spent(3, 0.125, 1)
    assert log.spend("agent/daily", 1000) == Spent()  # an earlier window: gone
    assert log.spend("agent/hourly", 1000) == Spent(1, 0.0, 1)  # another scope's: kept
    # Spend belongs to no job: erasing a key or expiring jobs leaves it.
    log.forget_key("agent/daily")
    assert log.expire_jobs(now_ms=2**62) == {}
    assert log.spend("agent/daily", 2000) == Spent(3, 0.125, 1)


def test_spend_added_from_many_threads_is_all_counted(log: ActionLog) -> None:
    def add() -> None:
        for _ in range(25):
            log.add_spend("agent/shared", 0, Spent(2, 0.5, 1))

    threads = [threading.Thread(target=add) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert log.spend("agent/shared", 0) == Spent(200, 50.0, 100)


def test_a_pace_hands_out_places_one_after_another(log: ActionLog) -> None:
    assert log.pace("m/requests", 100, now_ms=1000) == 1000
    assert log.pace("m/requests", 100, now_ms=1010) == 1100
    assert log.pace("m/requests", 100, now_ms=1020) == 1200
    assert log.pace("m/tokens", 50, now_ms=1020) == 1020  # another pace
    assert log.pace("m/requests", -250, now_ms=1030) == 1300  # time given back
    assert log.pace("m/requests", 100, now_ms=1040) == 1050
    assert log.pace("m/requests", 100, now_ms=5000) == 5000  # idle: no credit saved up


def test_a_pace_taken_from_many_threads_gives_each_its_own_place(log: ActionLog) -> None:
    starts: list[float] = []
    lock = threading.Lock()

    def take() -> None:
        for _ in range(20):
            start = log.pace("shared", 10, now_ms=0)
            with lock:
                starts.append(start)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(starts) == [10.0 * n for n in range(80)]


def test_run_index_is_empty_for_a_job_without_records(log: ActionLog) -> None:
    """run_index() of a job with nothing stored is {}, whatever other jobs hold."""
    assert log.run_index("job-1") == {}
    log.complete(record(ident(job="job-2")))
    log.record_call(ident(job="job-2", step=2), call(0), epoch=1)
    assert log.run_index("job-1") == {}


def test_run_index_has_the_highest_run_of_each_key(log: ActionLog) -> None:
    """run_index() maps each key to its highest run with a completed record or a call."""
    log.complete(record(ident(key="k1", run=1)))
    log.complete(record(ident(key="k1", run=3, step=2)))
    log.complete(record(ident(key="k1", run=2)))
    log.record_call(ident(key="k2", run=5), call(0), epoch=1)  # an interrupted action only
    log.complete(record(ident(key="k3", run=2)))
    log.record_call(ident(key="k3", run=4, step=3), call(0), epoch=1)  # above its records
    log.record_call(ident(key="k4", run=7), call(0), epoch=1)
    log.complete(record(ident(key="k4", run=9)))  # completed above its calls
    log.complete(record(ident(job="job-2", key="k1", run=99)))
    assert log.run_index("job-1") == {"k1": 3, "k2": 5, "k3": 4, "k4": 9}
    assert log.run_index("job-2") == {"k1": 99}


def test_run_index_follows_completion_and_pruning(log: ActionLog) -> None:
    """Completing an interrupted action keeps its run indexed; pruning everything empties it."""
    log.record_call(ident(run=2), call(0), epoch=1)
    log.complete(record(ident(run=2), epoch=1))
    assert log.run_index("job-1") == {"k1": 2}
    log.record_call(ident(key="k2", run=1), call(0), epoch=1)
    log.prune("job-1", before_epoch=2)
    assert log.run_index("job-1") == {}


def test_run_index_sees_other_instances_writes(log: ActionLog, backend: Backend) -> None:
    """run_index() includes what another instance (another process) wrote before the call."""
    other = backend.open()
    other.complete(record(ident(key="k1", run=4)))
    other.record_call(ident(key="k2", run=6), call(0), epoch=1)
    assert log.run_index("job-1") == {"k1": 4, "k2": 6}


def test_call_durations_round_trip(log: ActionLog) -> None:
    """A call's duration comes back from calls() and completed(); none stays None."""
    timed = [dataclasses.replace(call(0, "a"), duration_ms=12.5), call(1, "b")]
    for c in timed:
        log.record_call(ident(), c, epoch=1)
    log.complete(record(ident(step=2), calls=timed))
    log.complete(record(ident(step=3), calls=[call(0, "c")]))
    assert [c.duration_ms for c in log.calls(ident())] == [12.5, None]
    assert [c.duration_ms for c in log.completed(ident(step=2)).calls] == [12.5, None]
    assert [c.duration_ms for c in log.completed(ident(step=3)).calls] == [None]


def test_key_records_lists_one_keys_completed_actions_in_order(log: ActionLog) -> None:
    """key_records() returns the completed records of one key and job, by run, step and
    action, and nothing of other keys or jobs or of interrupted actions."""
    wanted = [ident(run=1, step=1), ident(run=1, step=2, action="b"), ident(run=1, step=2)]
    wanted += [ident(run=3, step=1)]
    others = [ident(key="k2"), ident(job="job-2"), ident(key="k10")]
    for identity in [*reversed(wanted), *others]:
        log.complete(record(identity, epoch=identity.run_sequence))
    log.record_call(ident(run=4), call(0), epoch=1)
    read = log.key_records("job-1", "k1")
    assert [r.identity for r in read] == sorted(
        wanted, key=lambda i: (i.run_sequence, i.step, i.action)
    )
    assert read[0] == record(wanted[0], epoch=1)
    assert log.key_records("job-1", "nobody") == []


def test_key_interrupted_groups_one_keys_partial_calls(log: ActionLog) -> None:
    """key_interrupted() returns each interrupted action of one key with its calls by index
    and their shared epoch; completed actions and other keys and jobs are left out."""
    log.record_call(ident(run=2), call(0, "first"), epoch=3)
    log.record_call(ident(run=2), call(1, "second"), epoch=4)
    log.record_call(ident(run=1, step=3), call(0, "only"), epoch=2)
    log.record_call(ident(run=1, step=4), call(0, "done"), epoch=2)
    log.complete(record(ident(run=1, step=4)))
    log.record_call(ident(key="k2"), call(0), epoch=1)
    log.record_call(ident(job="job-2"), call(0), epoch=1)
    read = log.key_interrupted("job-1", "k1")
    assert [(a.identity, a.epoch) for a in read] == [(ident(run=1, step=3), 2), (ident(run=2), 4)]
    assert [summary(list(a.calls)) for a in read] == [
        [(0, "llm", "d0", "only")],
        [(0, "llm", "d0", "first"), (1, "llm", "d0", "second")],
    ]
    assert log.key_interrupted("job-1", "nobody") == []


def test_jobs_lists_every_job_with_records_or_calls(log: ActionLog) -> None:
    """jobs() names each job once, sorted, whether it has records, calls or both."""
    assert log.jobs() == []
    log.complete(record(ident(job="b")))
    log.complete(record(ident(job="b", key="k2")))
    log.record_call(ident(job="a"), call(0), epoch=1)
    log.record_call(ident(job="b", step=2), call(0), epoch=1)
    assert log.jobs() == ["a", "b"]
    log.prune("a", before_epoch=2)
    assert log.jobs() == ["b"]


def test_second_instance_sees_records(log: ActionLog, backend: Backend) -> None:
    """Another log opened on the same store (another process) reads what this one wrote."""
    log.complete(record())
    log.record_call(ident(step=2), call(0, "partial"), epoch=1)
    other = backend.open()
    assert other.completed(ident()) == record()
    assert summary(other.calls(ident(step=2))) == [(0, "llm", "d0", "partial")]
    other.complete(record(ident(step=3)))
    assert log.count("job-1") == 3


def test_concurrent_writers(log: ActionLog, backend: Backend) -> None:
    """Threads writing through one shared log and through their own logs lose nothing."""
    threads, per_thread = 6, 15
    own = [backend.open() for _ in range(threads // 2)]
    errors: list[BaseException] = []

    def work(n: int) -> None:
        target = log if n % 2 == 0 else own[n // 2]
        try:
            for i in range(per_thread):
                identity = ident(key=f"t{n}", step=i)
                target.record_call(identity, call(0, i), epoch=1)
                target.record_call(identity, call(1, i), epoch=1)
                target.complete(record(identity, calls=target.calls(identity)))
        except BaseException as error:
            errors.append(error)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    assert log.count("job-1") == threads * per_thread
    sample = log.completed(ident(key="t3", step=4))
    assert [c.result for c in sample.calls] == [4, 4]


def test_close_is_idempotent_and_context_managed(backend: Backend) -> None:
    """close() may be called twice; a log is a context manager that closes on exit."""
    with backend.open() as log:
        log.complete(record())
    log.close()
    with backend.open() as again:
        assert again.completed(ident()) == record()


# -- retention across jobs: expire_jobs, job markers and summaries (issue 39) -------------

WINDOW = 1_000


def job_record(job: str, step: int, epoch: int, payload: str = "") -> ActionRecord:
    short_term = MemoryDelta(puts={"note": payload}) if payload else MemoryDelta()
    return ActionRecord(ident(job=job, step=step), MemoryDelta(), short_term, (), (), epoch)


def write(log: ActionLog, job: str, epoch: int, records: int = 2, calls: int = 1) -> None:
    """``records`` completed actions and ``calls`` interrupted ones of ``job`` at ``epoch``."""
    for step in range(records):
        log.complete(job_record(job, step, epoch))
    for step in range(records, records + calls):
        log.record_call(ident(job=job, step=step), DurableCall(0, "llm", "d0", "r"), epoch)


def marked(job: str, seen_ms: int, generated: bool = True, window: int = WINDOW) -> JobMarker:
    return JobMarker(job, generated, window, seen_ms)


def summaries(log: ActionLog) -> dict[str, JobSummary]:
    return {summary.job: summary for summary in log.job_summaries()}


def test_a_generated_job_expires_once_neither_seen_nor_written_within_its_window(
    log: ActionLog,
) -> None:
    log.mark_job(marked("gen", seen_ms=10_000))
    write(log, "gen", epoch=10_000)
    log.record_call(ident(job="gen", step=9), DurableCall(0, "llm", "d0", "r"), 10_500)
    write(log, "other", epoch=0)
    assert log.expire_jobs(now_ms=11_000) == {}  # seen 1000 ms ago: within the window
    assert log.expire_jobs(now_ms=11_400) == {}  # not seen since, but written at 10_500
    assert log.expire_jobs(now_ms=11_501) == {"gen": 4}  # 2 records, 2 interrupted actions
    assert log.count("gen") == 0 and log.run_index("gen") == {}
    assert "gen" not in summaries(log)
    assert log.count("other") == 3  # no marker: written before markers, never expired
    assert log.expire_jobs(now_ms=11_501) == {}


def test_a_pinned_job_is_never_expired_however_old_its_records(log: ActionLog) -> None:
    """A later submission restored from a savepoint may replay it under the same name."""
    log.mark_job(marked("pinned", seen_ms=0, generated=False))
    write(log, "pinned", epoch=0)
    assert log.expire_jobs(now_ms=10**12) == {}
    assert log.count("pinned") == 3
    assert summaries(log)["pinned"].marker == marked("pinned", 0, generated=False)


def test_a_marker_of_a_job_with_no_rows_left_goes_once_unseen(log: ActionLog) -> None:
    """A pinned job that pruned all its records leaves no marker behind for ever; a later
    attempt marks it again."""
    log.mark_job(marked("pinned", seen_ms=0, generated=False))
    log.mark_job(marked("idle", seen_ms=0))
    assert set(summaries(log)) == {"pinned", "idle"}
    assert log.expire_jobs(now_ms=WINDOW - 1) == {}
    assert set(summaries(log)) == {"pinned", "idle"}
    assert log.expire_jobs(now_ms=WINDOW + 1) == {"idle": 0}
    assert summaries(log) == {}


def test_each_job_is_judged_by_its_own_window(log: ActionLog) -> None:
    log.mark_job(marked("short", seen_ms=0, window=100))
    log.mark_job(marked("long", seen_ms=0, window=100_000))
    write(log, "short", epoch=0)
    write(log, "long", epoch=0)
    assert log.expire_jobs(now_ms=50_000) == {"short": 3}
    assert log.count("long") == 3


def test_marking_a_job_again_keeps_it_and_never_moves_seen_back(log: ActionLog) -> None:
    log.mark_job(marked("gen", seen_ms=0))
    write(log, "gen", epoch=0)
    log.mark_job(marked("gen", seen_ms=5_000))
    log.mark_job(marked("gen", seen_ms=3_000))  # another process's older clock reading
    assert summaries(log)["gen"].marker == marked("gen", 5_000)
    assert log.expire_jobs(now_ms=5_500) == {}
    assert log.count("gen") == 3


def test_job_summaries_count_actions_bytes_and_the_newest_epoch(log: ActionLog) -> None:
    log.mark_job(marked("a", seen_ms=7))
    log.complete(job_record("a", 1, epoch=5, payload="x" * 1000))
    log.complete(job_record("a", 2, epoch=9))
    log.record_call(ident(job="a", step=3), DurableCall(0, "llm", "d0", "r"), 4)
    log.record_call(ident(job="a", step=3), DurableCall(1, "llm", "d0", "r"), 4)
    log.record_call(ident(job="b", step=1), DurableCall(0, "llm", "d0", "r"), 12)
    log.mark_job(marked("c", seen_ms=1, generated=False))
    found = summaries(log)
    assert sorted(found) == ["a", "b", "c"]
    a = found["a"]
    assert (a.records, a.interrupted, a.newest_ms, a.marker) == (2, 1, 9, marked("a", 7))
    assert a.payload_bytes > 1000
    b = found["b"]
    assert (b.records, b.interrupted, b.newest_ms, b.marker) == (0, 1, 12, None)
    assert b.payload_bytes > 0
    c = found["c"]
    assert (c.records, c.interrupted, c.payload_bytes, c.newest_ms) == (0, 0, 0, None)


def test_expiring_is_safe_from_several_instances_at_once(log: ActionLog, backend: Backend) -> None:
    """Subtasks starting together all expire: each job goes once, nothing else does."""
    for n in range(20):
        log.mark_job(marked(f"gen-{n}", seen_ms=0))
        write(log, f"gen-{n}", epoch=0)
    log.mark_job(marked("live", seen_ms=10 * WINDOW))
    write(log, "live", epoch=0)
    others = [backend.open() for _ in range(4)]
    results: list[dict[str, int]] = []
    errors: list[BaseException] = []

    def expire(other: ActionLog) -> None:
        try:
            results.append(other.expire_jobs(now_ms=10 * WINDOW))
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=expire, args=(other,)) for other in others]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    removed: dict[str, int] = {}
    for result in results:
        assert not removed.keys() & result.keys()  # no job removed twice
        removed.update(result)
    assert removed == {f"gen-{n}": 3 for n in range(20)}
    assert sorted(summaries(log)) == ["live"]


def test_reclaiming_space_leaves_every_row(log: ActionLog, backend: Backend) -> None:
    write(log, "a", epoch=0)
    write(log, "b", epoch=0)
    log.prune("a", before_epoch=1)
    before = log.storage_bytes()
    log.reclaim_space()
    log.reclaim_space(full=True)
    assert (log.count("a"), log.count("b")) == (0, 3)
    assert log.completed(ident(job="b", step=1)) is not None
    if backend.name == "memory":
        assert before is None
    else:
        assert before > 0 and log.storage_bytes() > 0
