"""Writes the golden fixtures of Flink state in the format this release writes.

``python -m tests.runtime.golden.make_current OUT_DIR RELEASE`` writes ``control-RELEASE-*.pickle``
and ``memory-RELEASE-marker.pickle`` from the values ``make_legacy`` wrote for 0.1.0. Run
once per release whose format changed, never over existing files: each fixture is what its
release wrote, and later code must keep reading it.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from typing import Any

from flink_agents.memory import ObjectMarker
from flink_agents.runtime._driver import KeyControl
from flink_agents.runtime._persisted import encode_control
from tests.runtime.golden.make_legacy import values


def stored_values() -> dict[str, Any]:
    """What this release stores for each 0.1.0 fixture's value, by the 0.1.0 fixture's name."""
    stored: dict[str, Any] = {}
    for name, value in values().items():
        if name == "control-0.1.0-idle":
            stored[name] = encode_control(KeyControl(value))
        elif name.startswith("control-0.1.0-") and type(value) is tuple:
            stored[name] = encode_control(KeyControl(*value))
        elif name == "memory-0.1.0-marker":
            stored[name] = ObjectMarker(value.fields)
    return stored


def sleeping_control() -> KeyControl:
    """A key with a run set aside by a sleep (``ctx.sleep``, added in 0.3.0) and one
    scheduled event: the value behind ``control-0.3.0-sleeping``."""
    from flink_agents.api import EventScheduled, InputEvent
    from flink_agents.runtime._engine import PendingAction, RunState
    from flink_agents.runtime._scheduling import WaitingRun
    from tests.runtime.golden.values import (
        INPUT_ID,
        KEY,
        NOTE,
        RUN_INPUT,
        SCHEDULED,
        SLEEPING_SENSORY,
        SLEEPING_SEQUENCE,
        SLEEPING_WAKE_MS,
        SLEEPING_WAKES,
    )

    run = RunState(key=KEY, sequence=SLEEPING_SEQUENCE, input=RUN_INPUT, steps=1, parked=True)
    run.queue.append(PendingAction("nap", NOTE))
    run.queue.append(PendingAction("log", InputEvent(id=INPUT_ID, input=RUN_INPUT)))
    run.sensory_written = True
    run.wakes = SLEEPING_WAKES
    sensory = tuple(
        (key, ObjectMarker(stored) if type(stored) is tuple else stored)
        for key, stored in SLEEPING_SENSORY
    )
    handle, due_ms, event = SCHEDULED[0]
    scheduled = (EventScheduled(handle=handle, due_ms=due_ms, event=event),)
    waiting = (WaitingRun(SLEEPING_WAKE_MS, run, sensory),)
    return KeyControl(SLEEPING_SEQUENCE + 2, None, 0, scheduled, waiting)


def waiting_control() -> KeyControl:
    """A key with a run waiting for a signal (``ctx.wait_for``, added in 0.3.0): its head
    action's first wait (no timeout) was answered, its second waits until
    ``WAITING_UNTIL_MS``; beside the sleeping run of ``sleeping_control``. The value behind
    ``control-0.3.0-waiting``."""
    from flink_agents.runtime._run_state import PendingAction, RunState, Waited
    from flink_agents.runtime._scheduling import WaitingRun
    from tests.runtime.golden.values import (
        APPROVAL,
        KEY,
        NOTE,
        RUN_INPUT,
        WAITING_SEQUENCE,
        WAITING_UNTIL_MS,
        Approval,
    )

    run = RunState(key=KEY, sequence=WAITING_SEQUENCE, input=RUN_INPUT, parked=True)
    run.queue.append(PendingAction("ask", NOTE))
    run.waits = (Waited(Approval, None, APPROVAL), Waited(Approval, WAITING_UNTIL_MS))
    waiting = WaitingRun(WAITING_UNTIL_MS, run, (), signal=Approval)
    sleeping = sleeping_control()
    return KeyControl(
        WAITING_SEQUENCE + 1, None, 0, (), tuple(sorted((waiting, *sleeping.waiting), key=_due))
    )


def forgetting_control() -> KeyControl:
    """A key with a ``ForgetKey`` request (added in 0.3.0) queued behind its parked run, with
    an input queued before it and a scheduled event pending: the value behind
    ``control-0.3.0-forgetting``."""
    from flink_agents.runtime._run_state import PendingAction, RunState
    from tests.runtime.golden.values import KEY, NOTE, RUN_INPUT, SLEEPING_SEQUENCE

    run = RunState(key=KEY, sequence=SLEEPING_SEQUENCE, input=RUN_INPUT, steps=1, parked=True)
    run.queue.append(PendingAction("nap", NOTE))
    scheduled = sleeping_control().scheduled
    return KeyControl(SLEEPING_SEQUENCE, run, 2, scheduled, (), forgets=1)


def expiring_control() -> KeyControl:
    """A key of a job with ``short-term-memory-ttl`` (added in 0.3.0): when it last ran and
    when its expiry check is due, beside a scheduled event: the value behind
    ``control-0.3.0-expiring``."""
    from tests.runtime.golden.values import SLEEPING_SEQUENCE, SLEEPING_WAKE_MS

    scheduled = sleeping_control().scheduled
    return KeyControl(
        SLEEPING_SEQUENCE,
        scheduled=scheduled,
        active_ms=SLEEPING_WAKE_MS - 1000,
        cleanup_ms=SLEEPING_WAKE_MS + 3_600_000,
    )


def expiring_idle_control() -> KeyControl:
    """An idle key of a job with ``short-term-memory-ttl``, its expiry check pending: the
    value behind ``control-0.3.0-expiring-idle``."""
    from tests.runtime.golden.values import SLEEPING_SEQUENCE, SLEEPING_WAKE_MS

    return KeyControl(
        SLEEPING_SEQUENCE, active_ms=SLEEPING_WAKE_MS, cleanup_ms=SLEEPING_WAKE_MS + 3_600_000
    )


def forget_request() -> Any:
    """A queued ``ForgetKey`` request: the value behind ``pending-0.3.0-forget``."""
    from flink_agents.api import ForgetKey
    from flink_agents.runtime._erasure import forget_input
    from tests.runtime.golden.values import KEY

    return forget_input(ForgetKey(KEY, request_id="ticket-1"))


def key_spend_totals() -> Any:
    """What a key budget keeps in the key's short-term memory (added in 0.3.0): the value
    behind ``spend-0.3.0-key-totals``."""
    from flink_agents.runtime._spend import _kept
    from flink_agents.runtime.action_log import Spent

    return _kept(1_764_460_800_000, Spent(tokens=450, cost=0.0135, calls=3))


def budget_verdict() -> Any:
    """What ``SpendGuard.admit`` answers, recorded in the action log as a durable call's
    result (added in 0.3.0): the value behind ``spend-0.3.0-verdict``."""
    return {
        "version": 1,
        "model": "backup",
        "tokens": 42,
        "reserved": [["agent-calls", 1_764_460_800_000, 0.000105]],
    }


ROOT_SEQUENCE = 1_234_567
"""The run sequence of ``memory-0.3.0-root-sequence``."""


def stored_memory() -> dict[str, Any]:
    """Memory's objects as Flink state holds them since 0.3.0 (``memory/_stored.py``), by
    fixture name: the root's marker, the root's marker with an idle key's run sequence
    (``ROOT_SEQUENCE``), another object's, and a user's tuple that begins with one of the
    tags (kept apart from a marker)."""
    from flink_agents.memory import RootEntry, stored_form

    fields = ("name", "address")
    return {
        "memory-0.3.0-root": stored_form("", ObjectMarker(fields)),
        "memory-0.3.0-root-sequence": stored_form(
            "", RootEntry(ObjectMarker(fields), ROOT_SEQUENCE)
        ),
        "memory-0.3.0-object": stored_form("profile", ObjectMarker(fields)),
        "memory-0.3.0-tagged-value": stored_form("note", ("flink-agents/object", 1, fields)),
    }


def _due(entry: Any) -> int:
    return entry.due_ms


def main(out: Path, release: str) -> None:
    for name, value in stored_values().items():
        target = out / f"{name.replace('-0.1.0-', f'-{release}-')}.pickle"
        if target.exists():
            raise SystemExit(f"{target} exists: a fixture is never regenerated")
        target.write_bytes(pickle.dumps(value, protocol=pickle.DEFAULT_PROTOCOL))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
