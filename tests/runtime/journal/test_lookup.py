"""The one question the engine asks the journal per action (``ActionJournal.lookup``): the
execution's identity, the record to replay, and the calls its recorder starts from."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from flink_agents._ids import digest_args, key_text
from flink_agents.memory import MemoryDelta
from flink_agents.runtime.action_log import (
    ActionIdentity,
    ActionRecord,
    DurableCall,
    InMemoryActionLog,
)
from flink_agents.runtime.journal import ActionJournal, Lookup


class CountingLog(InMemoryActionLog):
    """Counts the reads a lookup may make."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: Counter[str] = Counter()

    def completed(self, identity):
        self.reads["completed"] += 1
        return super().completed(identity)

    def calls(self, identity):
        self.reads["calls"] += 1
        return super().calls(identity)


class SpelledKey:
    """A key with no JSON spelling: ``key_text`` falls back to its ``repr``, counted."""

    spelled = 0

    def __repr__(self) -> str:
        SpelledKey.spelled += 1
        return "SpelledKey()"


@pytest.fixture
def opened() -> Iterator[list[ActionJournal]]:
    """The journals a test opens, closed after it."""
    journals: list[ActionJournal] = []
    yield journals
    for journal in journals:
        journal.close()


def attempt(log: CountingLog, opened: list[ActionJournal]) -> ActionJournal:
    """A new attempt of the job on ``log``."""
    opened.append(ActionJournal(log, "job"))
    return opened[-1]


def earlier_attempt(log: CountingLog, key: object) -> ActionIdentity:
    """Run 1 of ``key`` as an earlier attempt left it: step 1 completed, step 2 interrupted
    after one durable call."""
    done = ActionIdentity("job", key_text(key), 1, 1, "first")
    log.complete(ActionRecord(done, MemoryDelta(), MemoryDelta(), (), (), 1))
    interrupted = ActionIdentity("job", key_text(key), 1, 2, "second")
    log.record_call(
        interrupted, DurableCall(0, f"{__name__}:paid", digest_args(("x",), {}), "paid"), 1
    )
    log.reads.clear()
    return done


def test_a_run_no_earlier_attempt_reached_is_answered_without_reading_the_log(opened):
    log = CountingLog()
    journal = attempt(log, opened)
    assert journal.lookup("k", 1, 1, "first") == Lookup(
        ActionIdentity("job", key_text("k"), 1, 1, "first"), None, None
    )
    assert (log.reads, journal.reads, journal.replayed_actions) == (Counter(), 0, 0)


def test_a_completed_action_is_answered_with_its_record_to_replay(opened):
    log = CountingLog()
    done = earlier_attempt(log, "k")
    journal = attempt(log, opened)
    lookup = journal.lookup("k", 1, 1, "first")
    assert lookup.identity == done
    assert lookup.record == log.completed(done)
    assert lookup.calls is None
    assert journal.replayed_actions == 1


def test_an_interrupted_action_is_answered_with_the_calls_its_recorder_reuses(opened):
    """The calls loaded by the lookup are the recorder's: it reuses the first without
    reading the log again."""
    log = CountingLog()
    earlier_attempt(log, "k")
    journal = attempt(log, opened)
    lookup = journal.lookup("k", 1, 2, "second")
    assert lookup.record is None
    assert [call.result for call in lookup.calls] == ["paid"]
    reads = Counter(log.reads)
    recorder = journal.recorder(lookup, look_up=False)
    slot = recorder.begin(paid, ("x",), {})
    assert slot.recorded is not None and slot.replay() == "paid"
    assert log.reads == reads == Counter(completed=1, calls=1)
    assert journal.reused_calls == 1


def test_the_key_is_spelled_once_for_the_lookup_and_its_recorder(opened):
    log = CountingLog()
    key = SpelledKey()
    earlier_attempt(log, key)
    journal = attempt(log, opened)
    SpelledKey.spelled = 0
    lookup = journal.lookup(key, 1, 2, "second")
    journal.recorder(lookup, look_up=False)
    assert SpelledKey.spelled == 1
    assert lookup.identity.key == "repr:SpelledKey()"


def paid(arg: str) -> str:
    return "paid"
