"""The key's control value as Flink state holds it: by field name, with a version read back.

A key's control value (``KeyControl``: its run sequence, its parked run, the inputs queued
behind it) outlives the code that wrote it: a job restored from a savepoint may run a later
release. So what goes into Flink state is plain data (ints, strings, tuples, dicts, and the
user's own values and events), never an object of a class of ours that would be found by
its module path, and every record carries its format and version (``docs/upgrading.md``):

``int``
    An idle key (no parked run, nothing queued): its run sequence alone. It is what most keys
    hold between records, written once per record. Since 0.3.0 the Flink runner keeps it in
    the key's short-term memory root entry instead of a value of its own (``(2, names,
    sequence)``, ``_FlinkKeyState``); releases before wrote it here, and it is still read.
``("flink-agents/control", 2, {...})``
    A key with a parked run or queued inputs: ``sequence``, ``pending`` and ``run`` (None, or
    the run by field name: ``encode_run``).
``("flink-agents/control", 3, {...})``
    A key with scheduled events (``ctx.schedule``) besides: version 2's fields and
    ``scheduled``, each pending event by field name (``handle``, ``due_ms``, ``event``),
    soonest first. A key without any is still written as version 2 (or an ``int``), which
    release 0.2.0 reads too.
``("flink-agents/control", 4, {...})``
    A key with runs set aside while an action sleeps (``ctx.sleep``) besides: version 3's
    fields and ``waiting``, each such run by field name (``wake_ms``, ``queued``, ``run``
    as ``encode_run`` gives it, and ``sensory``, its sensory memory as ``(key, stored)``
    pairs, an object's field names as ``("flink-agents/object", names)``), soonest first.

``("flink-agents/control", 5, {...})``
    A key with a run waiting for a signal (``ctx.wait_for``) besides: version 4's fields,
    its ``waiting`` entries with ``signal`` (the event type waited for, the user's class;
    None for a sleep) and ``wake_ms`` None for a wait without a timeout. A key whose waiting
    runs all sleep is still written as version 4.
``("flink-agents/control", 6, {...})``
    A key with ``ForgetKey`` requests queued behind its run in progress: version 5's
    fields and ``forgets``, their number (while it is not 0, the key's scheduled events and
    waiting runs do not fire). Any other key is written as before.
``("flink-agents/control", 7, sequence, active_ms, cleanup_ms)``
    An idle key of a job with ``short-term-memory-ttl`` on: its run sequence, when a
    callback of the key last ran runs and when its expiry check is due (None: none).
``("flink-agents/control", 7, {...})``
    Any other key of such a job: ``sequence``, ``run``, ``pending``, ``active_ms``,
    ``cleanup_ms``, and those of ``scheduled``, ``waiting`` and ``forgets`` that are not
    empty. Without the option, keys are written as before.

A due scheduled event waiting behind a key's run in progress sits in the key's queue of
inputs as ``("flink-agents/due", 1, {handle, due_ms, event})``, a due waiting run as
``("flink-agents/wake", 1, {sequence})``, a signal as ``("flink-agents/signal", 1, {event})``
(``runtime/_scheduling.py``), a forget request as ``("flink-agents/forget", 1,
{request_id})`` (``runtime/_erasure.py``).

A run's fields (``encode_run``) are version 1, or version 2 when its head action has slept
(``wakes``: the times its sleeps end), or version 3 when it has waited for a signal
(``waits``: each wait's ``signal`` type, ``until_ms`` and ``reply``).

Releases up to 0.1.0 stored a busy key as the tuple ``(sequence, RunState, pending)``, the run
pickled by position through ``flink_agents.runtime._engine._unpickle_run``, and earlier ones
the ``KeyControl`` dataclass; ``decode_control`` still reads both (their pickles name those
module paths, which therefore stay importable), and the key is written in this format when
it next changes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any
from uuid import UUID

from flink_agents.api import InputEvent
from flink_agents.memory import MemoryDelta, ObjectMarker, StateFormatError
from flink_agents.runtime._driver import KeyControl
from flink_agents.runtime._run_state import MemberResult, PendingAction, RunState, Waited
from flink_agents.runtime._scheduling import WaitingRun, scheduled_entry, scheduled_fields
from flink_agents.runtime._unvalidated import input_event

CONTROL_TAG = "flink-agents/control"
CONTROL_VERSION = 7
"""Version 1: release 0.1.0's ``(sequence, RunState, pending)`` tuple (read, never written);
2: without scheduled events (written for a key that has none); 3: without waiting runs
(written for a key that has none); 4: without runs waiting for a signal; 5: without
queued forget requests; 6: without ``short-term-memory-ttl``."""
OBJECT_TAG = "flink-agents/object"
"""An object of a waiting run's sensory memory (its field names), as ``encode_control``
keeps it."""


def encode_control(control: KeyControl) -> Any:
    """``control`` as the key's control state holds it."""
    if control.active_ms is not None or control.cleanup_ms is not None:
        return _with_expiry(control)
    idle = control.run is None and not control.pending
    if idle and not control.scheduled and not control.waiting:
        return control.sequence
    run = None if control.run is None else encode_run(control.run)
    fields = {"sequence": control.sequence, "run": run, "pending": control.pending}
    if not control.scheduled and not control.waiting and not control.forgets:
        return (CONTROL_TAG, 2, fields)
    fields["scheduled"] = tuple(scheduled_fields(entry) for entry in control.scheduled)
    if not control.waiting and not control.forgets:
        return (CONTROL_TAG, 3, fields)
    fields["waiting"] = tuple(_waiting_fields(entry) for entry in control.waiting)
    if control.forgets:
        fields["forgets"] = control.forgets
        return (CONTROL_TAG, 6, fields)
    if not any(entry.signal is not None for entry in control.waiting):
        return (CONTROL_TAG, 4, fields)
    return (CONTROL_TAG, 5, fields)


def _with_expiry(control: KeyControl) -> tuple[Any, ...]:
    """Version 7: a key's control value with ``short-term-memory-ttl`` on. An idle key's is
    the flat ``(tag, 7, sequence, active_ms, cleanup_ms)``, what most keys hold between
    records: in thread mode a value with a dict in it cost the job a tenth of its
    throughput, written once per record (``bench/RESULTS.md``). Others hold their fields
    beyond the run sequence, run and queue count only where they are not empty."""
    if control.run is None and not (
        control.pending or control.scheduled or control.waiting or control.forgets
    ):
        return (CONTROL_TAG, 7, control.sequence, control.active_ms, control.cleanup_ms)
    fields: dict[str, Any] = {
        "sequence": control.sequence,
        "run": None if control.run is None else encode_run(control.run),
        "pending": control.pending,
        "active_ms": control.active_ms,
        "cleanup_ms": control.cleanup_ms,
    }
    if control.scheduled:
        fields["scheduled"] = tuple(scheduled_fields(entry) for entry in control.scheduled)
    if control.waiting:
        fields["waiting"] = tuple(_waiting_fields(entry) for entry in control.waiting)
    if control.forgets:
        fields["forgets"] = control.forgets
    return (CONTROL_TAG, CONTROL_VERSION, fields)


def _waiting_fields(entry: WaitingRun) -> dict[str, Any]:
    sensory = tuple(
        (key, (OBJECT_TAG, stored.fields) if type(stored) is ObjectMarker else stored)
        for key, stored in entry.sensory
    )
    fields = {
        "wake_ms": entry.wake_ms,
        "queued": entry.queued,
        "run": encode_run(entry.run),
        "sensory": sensory,
    }
    if entry.signal is not None:
        fields["signal"] = entry.signal
    return fields


def _waiting_run(fields: dict[str, Any]) -> WaitingRun:
    sensory = tuple(
        (key, ObjectMarker(stored[1]) if _is_object(stored) else stored)
        for key, stored in fields["sensory"]
    )
    return WaitingRun(
        fields["wake_ms"],
        decode_run(fields["run"]),
        sensory,
        fields["queued"],
        fields.get("signal"),  # (version 5)
    )


def _is_object(stored: Any) -> bool:
    return type(stored) is tuple and len(stored) == 2 and stored[0] == OBJECT_TAG


def decode_control(stored: Any) -> KeyControl | None:
    """The ``KeyControl`` a control state value holds (None for a key without one).

    Raises:
        StateFormatError: the value is of a later version or not a control value.
    """
    if stored is None:
        return None
    if type(stored) is int:
        return KeyControl(stored)
    if type(stored) is tuple:
        if stored[0] == CONTROL_TAG:
            _version(stored[1], CONTROL_VERSION, "control value")
            if len(stored) == 5:  # version 7, an idle key
                return KeyControl(stored[2], active_ms=stored[3], cleanup_ms=stored[4])
            fields = stored[2]
            run = fields["run"]
            scheduled = fields.get("scheduled")  # (version 3)
            waiting = fields.get("waiting")  # (version 4)
            return KeyControl(
                fields["sequence"],
                None if run is None else decode_run(run),
                fields["pending"],
                () if scheduled is None else tuple(scheduled_entry(f) for f in scheduled),
                () if waiting is None else tuple(_waiting_run(f) for f in waiting),
                fields.get("forgets", 0),  # (version 6)
                fields.get("active_ms"),  # (version 7)
                fields.get("cleanup_ms"),
            )
        if len(stored) == 3 and type(stored[0]) is int:  # version 1 (0.1.0 and before)
            return KeyControl(*stored)
    if isinstance(stored, KeyControl):  # the dataclass itself (releases before 0.1.0)
        return stored
    raise StateFormatError(f"not a control value flink_agents can read: {type(stored)!r}")


def encode_run(run: RunState) -> dict[str, Any]:
    """A parked run by field name. Its queued actions' events are kept as they are (the
    user's classes are the user's), but for the run's own ``InputEvent``, which is kept as
    its id (the run holds its input once). ``ready`` is empty whenever a run is parked."""
    if run.ready:
        raise StateFormatError("a run with applied fan-out results cannot be kept in state")
    queue = []
    for pending in run.queue:
        event = pending.event
        if type(event) is InputEvent and event.input is run.input:
            queue.append((pending.action, None, event.id.int, "id" in event.model_fields_set))
        else:
            queue.append((pending.action, event))
    settled = None
    if run.settled is not None:
        settled = {
            position: {
                "sensory": _delta(sensory),
                "short_term": _delta(short_term),
                "events": tuple(events),
                "replayed": replayed,
            }
            for position, (sensory, short_term, events, replayed) in run.settled.items()
        }
    fields = {
        "version": 1,
        "key": run.key,
        "sequence": run.sequence,
        "input": run.input,
        "queue": tuple(queue),
        "steps": run.steps,
        "attempts": run.attempts,
        "retry_at_ms": run.retry_at_ms,
        "sensory_written": run.sensory_written,
        "parked": run.parked,
        "settled": settled,
    }
    if run.wakes or run.waits:
        fields["version"] = 2
        fields["wakes"] = run.wakes
    if run.waits:
        fields["version"] = RUN_VERSION
        fields["waits"] = tuple(
            {"signal": waited.signal, "until_ms": waited.until_ms, "reply": waited.reply}
            for waited in run.waits
        )
    return fields


RUN_VERSION = 3
"""The version of ``encode_run``'s fields: 1 for a run whose head action has not slept
nor waited (written as such, which release 0.2.0 reads), 2 adds ``wakes``, 3 ``waits``."""


def decode_run(fields: dict[str, Any]) -> RunState:
    """The ``RunState`` ``encode_run`` made ``fields`` of."""
    _version(fields["version"], RUN_VERSION, "parked run")
    run_input = fields["input"]
    # An entry is (action, event), or (action, None, id bits, id was given) for the run's own
    # input event: as 0.1.0 held it, (action, (id bits, id was given)).
    pairs = (e if len(e) == 2 else (e[0], (e[2], e[3])) for e in fields["queue"])
    queue = _queue(pairs, run_input)
    settled = fields["settled"]
    return RunState(
        key=fields["key"],
        sequence=fields["sequence"],
        input=run_input,
        queue=queue,
        steps=fields["steps"],
        attempts=fields["attempts"],
        retry_at_ms=fields["retry_at_ms"],
        sensory_written=fields["sensory_written"],
        parked=fields["parked"],
        wakes=tuple(fields.get("wakes", ())),
        waits=tuple(
            Waited(waited["signal"], waited["until_ms"], waited["reply"])
            for waited in fields.get("waits", ())
        ),
        settled=None
        if settled is None
        else {
            position: MemberResult(
                MemoryDelta(*member["sensory"]),
                MemoryDelta(*member["short_term"]),
                tuple(member["events"]),
                member["replayed"],
            )
            for position, member in settled.items()
        },
    )


def _input_event(run_input: Any, bits: int, id_set: bool) -> InputEvent:
    event = input_event(run_input, UUID(int=bits))
    if not id_set:  # as ``InputEvent(input=...)`` made it: the id was the default
        event.model_fields_set.discard("id")
    return event


_V010_RUN_FIELDS = (
    "key",
    "sequence",
    "input",
    "queue",
    "steps",
    "attempts",
    "retry_at_ms",
    "sensory_written",
    "parked",
    "settled",
    "ready",
)
"""``RunState``'s fields in release 0.1.0, the order its pickles hold them in."""


def run_of_v010(values: tuple[Any, ...]) -> RunState:
    """A parked run from release 0.1.0's pickle of it: its field values in ``_V010_RUN_FIELDS``
    order, each queued action an ``(action, event)`` pair, the run's own ``InputEvent`` as
    ``(id bits, id was given)``."""
    fields = dict(zip(_V010_RUN_FIELDS, values, strict=False))
    fields["queue"] = _queue(fields["queue"], fields["input"])
    if fields.get("settled") is not None:
        fields["settled"] = {p: MemberResult(*m) for p, m in fields["settled"].items()}
    return RunState(**fields)


def _queue(pairs: Iterable[tuple[str, Any]], run_input: Any) -> deque[PendingAction]:
    """A run's queue from ``(action, event)`` pairs whose event is the event itself, or the
    run's own ``InputEvent`` as ``(id bits, id was given)``: made once for all its
    listeners, holding the run's input."""
    queue: deque[PendingAction] = deque()
    input_events: dict[tuple[int, bool], InputEvent] = {}
    for action, event in pairs:
        if type(event) is tuple:
            made = input_events.get(event)
            if made is None:
                made = input_events[event] = _input_event(run_input, *event)
            event = made
        queue.append(PendingAction(action, event))
    return queue


def _delta(delta: MemoryDelta) -> tuple[bool, dict[str, Any], tuple[str, ...]]:
    return (delta.cleared, dict(delta.puts), tuple(delta.removals))


def _version(found: Any, known: int, what: str) -> None:
    if type(found) is not int or found > known:
        raise StateFormatError(
            f"a {what} in Flink state has format version {found!r}; this release of "
            f"flink_agents reads up to {known}: restore it with the release that wrote it "
            "or a later one"
        )
