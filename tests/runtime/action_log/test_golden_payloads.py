"""Every action-log payload release 0.2.0 wrote reads back with the current code (golden files).

``tests/runtime/golden/action-log-0.2.0-*.payload`` were written once by ``make_golden`` and
are never regenerated; ``make_golden.calls()`` and ``records()`` are what they hold. Payloads
of earlier layouts are golden bytes in ``tests/runtime/action_log/test_payloads.py``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from flink_agents.api import Event
from flink_agents.runtime.action_log import DurableCall, PickleSerializer
from flink_agents.runtime.action_log._base import (
    ActionRecord,
    decode_call,
    decode_record,
    encode_call,
    encode_record,
)
from tests.runtime.action_log.make_golden import (
    EPOCH,
    IDENTITY,
    calls,
    records,
    unpicklable_as_recorded,
)

GOLDEN = Path(__file__).parents[1] / "golden"
RELEASE = "0.2.0"
SERIALIZER = PickleSerializer()


def _payload(name: str) -> bytes:
    return (GOLDEN / f"action-log-{RELEASE}-{name}.payload").read_bytes()


def test_there_is_a_fixture_for_each_payload_and_no_other() -> None:
    on_disk = {p.name for p in GOLDEN.glob(f"action-log-{RELEASE}-*.payload")}
    named = {f"action-log-{RELEASE}-{name}.payload" for name in (*calls(), *records())}
    assert on_disk == named


def _error(error: BaseException | None) -> Any:
    """An exception as comparable data (exceptions compare by identity)."""
    return None if error is None else (type(error), error.args, vars(error))


def _call(call: DurableCall) -> tuple[Any, ...]:
    return (*(replace(call, error=None).__dict__.values()), _error(call.error))


def _event(event: Event) -> tuple[Any, ...]:
    return (
        type(event),
        list(event.__dict__.items()),
        event.__pydantic_fields_set__,
        event.__pydantic_private__,
        type(event.id),
    )


def _expected_call(name: str, call: DurableCall) -> DurableCall:
    if name == "call-failed-unpicklable":
        return replace(call, error=unpicklable_as_recorded())
    return call


@pytest.mark.parametrize("name", list(calls()))
def test_a_recorded_call_reads_back(name: str) -> None:
    read = decode_call(SERIALIZER, _payload(name))
    assert _call(read) == _call(_expected_call(name, calls()[name]))


@pytest.mark.parametrize("name", list(records()))
def test_a_completed_record_reads_back(name: str) -> None:
    want = records()[name]
    read = decode_record(SERIALIZER, IDENTITY, EPOCH, _payload(name))
    assert (read.identity, read.epoch) == (IDENTITY, EPOCH)
    assert (read.sensory, read.short_term, read.previous) == (
        want.sensory,
        want.short_term,
        want.previous,
    )
    assert [_event(e) for e in read.events] == [_event(e) for e in want.events]
    assert [_call(c) for c in read.calls] == [_call(c) for c in want.calls]


# Payloads whose bytes do not depend on the process: no set of several strings (a pydantic
# model's fields set) inside, whose pickle follows the set's per-process iteration order.
DETERMINISTIC = [
    "call-untimed",
    "call-timed",
    "call-failed",
    "call-failed-unpicklable",
    "record-bare",
    "record-untimed-calls",
]


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_the_current_code_still_writes_the_same_bytes(name: str) -> None:
    value: DurableCall | ActionRecord
    if name in calls():
        value = calls()[name]
        assert encode_call(SERIALIZER, value) == _payload(name)
    else:
        value = records()[name]
        assert encode_record(SERIALIZER, value) == _payload(name)
