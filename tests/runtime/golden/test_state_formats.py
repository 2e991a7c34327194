"""What flink_agents keeps in Flink state reads back across releases (golden fixtures).

``*-0.1.0-*.pickle`` are what release 0.1.0 (main d2e56d1) wrote, taken with its code
(``make_legacy``); ``*-0.2.0-*`` what 0.2.0 writes (``make_current``), and still writes for a
key without scheduled events; ``*-0.3.0-*`` what a key with scheduled events holds (control
value version 3, a due event in the queue of inputs), and one with a run set aside by a
sleep (version 4, its run's fields version 2, a woken run in the queue of inputs). Never
regenerated: the current code must read every one, and must still write the current
release's.
"""

from __future__ import annotations

import pickle
import pickletools
from pathlib import Path
from typing import Any

import pytest

from flink_agents.api import EventScheduled, InputEvent
from flink_agents.memory import (
    DictState,
    ObjectMarker,
    StoredState,
    from_stored,
    root_sequence,
    stored_form,
)
from flink_agents.runtime._driver import KeyControl
from flink_agents.runtime._erasure import forget_request_of
from flink_agents.runtime._persisted import (
    CONTROL_TAG,
    StateFormatError,
    decode_control,
    encode_control,
)
from flink_agents.runtime._scheduling import (
    due_event,
    due_input,
    is_queued_due,
    signal_input,
    signal_of,
    wake_input,
    woken_sequence,
)
from tests.runtime.golden.make_current import (
    ROOT_SEQUENCE,
    expiring_control,
    expiring_idle_control,
    forget_request,
    forgetting_control,
    sleeping_control,
    stored_memory,
    stored_values,
    waiting_control,
)
from tests.runtime.golden.make_legacy import values
from tests.runtime.golden.values import (
    APPROVAL,
    DUE,
    INPUT_ID,
    SCHEDULED,
    SLEEPING_SENSORY,
    SLEEPING_SEQUENCE,
    SLEEPING_WAKES,
    WAITING_SEQUENCE,
    WAITING_UNTIL_MS,
    Approval,
)

HERE = Path(__file__).parent
CURRENT = "0.2.0"
CONTROLS = ["idle", "parked-at-input", "mid-queue", "fan-out"]


def expected(name: str) -> KeyControl:
    value = values()[f"control-0.1.0-{name}"]
    return KeyControl(value) if type(value) is int else KeyControl(*value)


def load(name: str) -> Any:
    return pickle.loads((HERE / f"{name}.pickle").read_bytes())


@pytest.mark.parametrize("release", ["0.1.0", CURRENT])
@pytest.mark.parametrize("name", CONTROLS)
def test_control_values_read_back(release: str, name: str) -> None:
    control = decode_control(load(f"control-{release}-{name}"))
    want = expected(name)
    assert control == want
    if control.run is not None:
        # The run's own input event: one object per run, its id as given.
        inputs = {id(p.event) for p in control.run.queue if type(p.event) is InputEvent}
        assert len(inputs) <= 1
        for pending in control.run.queue:
            if type(pending.event) is InputEvent:
                assert pending.event.id == INPUT_ID
                assert pending.event.input is control.run.input
                assert pending.event.model_fields_set == {"id", "input"}


def test_the_oldest_control_value_reads_back() -> None:
    assert decode_control(load("control-0.1.0-dataclass")) == KeyControl(2, None, 0)


@pytest.mark.parametrize("name", CONTROLS)
def test_the_current_release_writes_its_fixture(name: str) -> None:
    assert encode_control(expected(name)) == load(f"control-{CURRENT}-{name}")


def _scheduled(handle: str, due_ms: int, event) -> EventScheduled:
    return EventScheduled(handle=handle, due_ms=due_ms, event=event)


def _fields(entry: EventScheduled) -> tuple:
    """What a scheduled event is, as kept (its own id is not: it is made again)."""
    return (entry.handle, entry.due_ms, entry.event)


def test_scheduled_events_read_back_and_are_written_as_version_3() -> None:
    stored = load("control-0.3.0-scheduled")
    control = decode_control(stored)
    assert (control.sequence, control.run, control.pending) == (7, None, 1)
    assert [_fields(entry) for entry in control.scheduled] == list(SCHEDULED)
    assert control.scheduled[0].event.model_fields_set == {"id", "text", "weight"}
    written = KeyControl(7, None, 1, tuple(_scheduled(*entry) for entry in SCHEDULED))
    assert encode_control(written) == stored
    # Without scheduled events a key is written as release 0.2.0 wrote it (it reads them).
    assert encode_control(KeyControl(7, None, 1))[1] == 2


def test_a_queued_due_event_reads_back() -> None:
    stored = load("pending-0.3.0-due")
    assert _fields(due_event(stored)) == DUE
    assert due_input(_scheduled(*DUE)) == stored
    assert due_event({"an": "input record"}) is None
    assert due_event(("a", "tuple", "record")) is None
    with pytest.raises(StateFormatError, match=r"queued due event .* format version 2"):
        due_event((stored[0], 2, stored[2]))


def test_a_sleeping_run_reads_back_and_is_written_as_version_4() -> None:
    stored = load("control-0.3.0-sleeping")
    control = decode_control(stored)
    want = sleeping_control()  # (a scheduled event's own id is made again: compared below)
    assert (control.sequence, control.run, control.waiting) == (want.sequence, None, want.waiting)
    (entry,) = control.waiting
    run = entry.run
    assert (run.sequence, run.wakes, entry.queued) == (SLEEPING_SEQUENCE, SLEEPING_WAKES, False)
    assert [p.action for p in run.queue] == ["nap", "log"]
    assert run.queue[1].event.input is run.input  # the run's own input, held once
    sensory = [(k, v.fields if type(v) is ObjectMarker else v) for k, v in entry.sensory]
    assert sensory == list(SLEEPING_SENSORY)
    assert [e.handle for e in control.scheduled] == [SCHEDULED[0][0]]
    assert encode_control(control) == stored
    # A run that has not slept keeps version 1 of a run's fields (0.2.0 reads them).
    entry.run.wakes = ()
    assert encode_control(control)[2]["waiting"][0]["run"]["version"] == 1


def test_a_run_waiting_for_a_signal_reads_back_and_is_written_as_version_5() -> None:
    stored = load("control-0.3.0-waiting")
    assert stored[:2] == (CONTROL_TAG, 5)
    control = decode_control(stored)
    assert control.sequence == WAITING_SEQUENCE + 1
    waiting, sleeping = control.waiting  # (soonest first)
    assert (waiting.signal, waiting.wake_ms, waiting.queued) == (Approval, WAITING_UNTIL_MS, False)
    assert (sleeping.signal, sleeping.run.sequence) == (None, SLEEPING_SEQUENCE)
    answered, pending = waiting.run.waits
    assert (answered.signal, answered.until_ms, answered.reply) == (Approval, None, APPROVAL)
    assert (pending.signal, pending.until_ms, pending.reply) == (Approval, WAITING_UNTIL_MS, None)
    assert [p.action for p in waiting.run.queue] == ["ask"]
    assert control == waiting_control()
    assert encode_control(control) == stored
    # Keys whose waiting runs all sleep are still written as version 4 (its readers read
    # them), a run that has not waited keeps version 2 or 1 of a run's fields.
    sleeps_only = KeyControl(control.sequence, None, 0, (), (sleeping,))
    assert encode_control(sleeps_only)[1] == 4
    waiting.run.waits = ()
    assert encode_control(control)[2]["waiting"][0]["run"]["version"] == 1


def test_a_queued_signal_reads_back() -> None:
    stored = load("pending-0.3.0-signal")
    assert signal_of(stored) == APPROVAL
    assert signal_input(APPROVAL) == stored
    assert signal_of({"an": "input record"}) is None
    assert signal_of(load("pending-0.3.0-due")) is None
    with pytest.raises(StateFormatError, match=r"queued signal .* format version 2"):
        signal_of((stored[0], 2, stored[2]))


def test_a_key_with_a_queued_forget_request_reads_back_and_is_written_as_version_6() -> None:
    stored = load("control-0.3.0-forgetting")
    assert stored[:2] == (CONTROL_TAG, 6)
    control = decode_control(stored)
    assert (control.pending, control.forgets) == (2, 1)
    assert [entry.handle for entry in control.scheduled] == [SCHEDULED[0][0]]
    assert [p.action for p in control.run.queue] == ["nap"]
    assert encode_control(control) == stored == encode_control(forgetting_control())
    # Without one queued, the key is written as before (its readers read it).
    control.forgets = 0
    assert encode_control(control)[1] == 3


def test_a_key_with_a_memory_ttl_reads_back_and_is_written_as_version_7() -> None:
    stored = load("control-0.3.0-expiring")
    assert stored[:2] == (CONTROL_TAG, 7)
    control = decode_control(stored)
    want = expiring_control()
    assert (control.sequence, control.active_ms, control.cleanup_ms) == (
        want.sequence,
        want.active_ms,
        want.cleanup_ms,
    )
    assert [entry.handle for entry in control.scheduled] == [SCHEDULED[0][0]]
    assert (control.run, control.pending, control.waiting, control.forgets) == (None, 0, (), 0)
    assert encode_control(control) == stored == encode_control(want)
    # Without the option, the key is written as before (its readers read it).
    control.active_ms = control.cleanup_ms = None
    assert encode_control(control)[1] == 3


def test_an_idle_key_with_a_memory_ttl_is_written_flat_and_reads_back() -> None:
    stored = load("control-0.3.0-expiring-idle")
    want = expiring_idle_control()
    assert stored == (CONTROL_TAG, 7, want.sequence, want.active_ms, want.cleanup_ms)
    assert decode_control(stored) == want
    assert encode_control(want) == stored


def test_a_queued_forget_request_reads_back() -> None:
    stored = load("pending-0.3.0-forget")
    assert forget_request_of(stored) == {"request_id": "ticket-1"}
    assert forget_request() == stored
    assert forget_request_of({"an": "input record"}) is None
    assert forget_request_of(load("pending-0.3.0-signal")) is None
    with pytest.raises(StateFormatError, match=r"forget request .* format version 2"):
        forget_request_of((stored[0], 2, stored[2]))


def test_a_queued_woken_run_reads_back() -> None:
    stored = load("pending-0.3.0-wake")
    assert woken_sequence(stored) == SLEEPING_SEQUENCE
    assert wake_input(sleeping_control().waiting[0]) == stored
    assert is_queued_due(stored) and is_queued_due(load("pending-0.3.0-due"))
    assert not is_queued_due({"an": "input record"})
    assert woken_sequence(load("pending-0.3.0-due")) is None
    with pytest.raises(StateFormatError, match=r"queued waking run .* format version 2"):
        woken_sequence((stored[0], 2, stored[2]))


def test_memory_markers_read_back() -> None:
    for release in ("0.1.0", CURRENT):
        assert load(f"memory-{release}-marker") == ObjectMarker(("name", "address"))
        # Read through the stored form's decoding, as a restored job reads them: as they are.
        for key in ("", "profile"):
            marker = from_stored(key, load(f"memory-{release}-marker"))
            assert marker == ObjectMarker(("name", "address"))


def test_memory_is_stored_as_plain_data_since_0_3_0() -> None:
    """Markers as versioned tuples (no class of ours in the pickle), and a user's tuple that
    looks like one kept apart; each fixture reads back, and is what this release writes."""
    fields = ("name", "address")
    want = {
        ("memory-0.3.0-root", ""): ObjectMarker(fields),
        ("memory-0.3.0-root-sequence", ""): ObjectMarker(fields),
        ("memory-0.3.0-object", "profile"): ObjectMarker(fields),
        ("memory-0.3.0-tagged-value", "note"): ("flink-agents/object", 1, fields),
    }
    for (name, key), value in want.items():
        stored = load(name)
        assert from_stored(key, stored) == value
        if name != "memory-0.3.0-root-sequence":
            assert stored_form(key, value) == stored
        assert b"flink_agents" not in (HERE / f"{name}.pickle").read_bytes()
    assert stored_memory() == {name: load(name) for name, _ in want}


def test_an_idle_keys_run_sequence_reads_back_from_its_root() -> None:
    """Since 0.3.0 an idle key's run sequence is kept in its short-term memory's root
    entry (``runtime/flink/_dispatcher.py``), not in a control value of its own."""
    stored = load("memory-0.3.0-root-sequence")
    assert root_sequence(stored) == ROOT_SEQUENCE
    assert root_sequence(load("memory-0.3.0-root")) is None
    assert StoredState(DictState({"": stored})).get_root() == (
        ObjectMarker(("name", "address")),
        ROOT_SEQUENCE,
    )


def test_what_is_stored_names_no_private_module_of_ours() -> None:
    """Pickles of state name our classes by public packages only: moving a private module
    of ours must not break a checkpoint."""
    values = dict(stored_values())
    values["control-0.3.0-scheduled"] = load("control-0.3.0-scheduled")
    values["pending-0.3.0-due"] = load("pending-0.3.0-due")
    values["control-0.3.0-sleeping"] = load("control-0.3.0-sleeping")
    values["pending-0.3.0-wake"] = load("pending-0.3.0-wake")
    values["control-0.3.0-forgetting"] = load("control-0.3.0-forgetting")
    values["pending-0.3.0-forget"] = load("pending-0.3.0-forget")
    values["control-0.3.0-expiring"] = load("control-0.3.0-expiring")
    values["control-0.3.0-expiring-idle"] = load("control-0.3.0-expiring-idle")
    for name, value in values.items():
        globals_named = _globals(pickle.dumps(value))
        private = [g for g in globals_named if g.startswith("flink_agents") and "._" in g]
        assert not private, f"{name} names {private}"


def test_a_later_version_is_refused_with_a_clear_error() -> None:
    stored = load(f"control-{CURRENT}-mid-queue")
    later = (CONTROL_TAG, 99, stored[2])
    with pytest.raises(StateFormatError, match="format version 99"):
        decode_control(later)
    fields = dict(stored[2])
    fields["run"] = {**fields["run"], "version": 99}
    with pytest.raises(StateFormatError, match="parked run"):
        decode_control((CONTROL_TAG, 2, fields))
    with pytest.raises(StateFormatError):
        decode_control("not a control value")


def _globals(data: bytes) -> list[str]:
    """The modules named by ``data``'s global lookups (the strings pushed before them)."""
    return [
        arg
        for op, arg, _ in pickletools.genops(data)
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "GLOBAL")
        and isinstance(arg, str)
        and arg.startswith("flink_agents")
    ]
