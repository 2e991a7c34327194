"""Payloads written by earlier versions still read back (golden bytes): before durable
calls were timed, and before events were packed."""

from __future__ import annotations

import dataclasses
from typing import Any
from uuid import UUID

import pytest
from pydantic import PrivateAttr

from flink_agents.api import Event, OutputEvent
from flink_agents.memory import MemoryDelta
from flink_agents.runtime.action_log import ActionLogError, DurableCall, PickleSerializer
from flink_agents.runtime.action_log._base import (
    ActionRecord,
    decode_call,
    decode_record,
    encode_call,
    encode_record,
)
from flink_agents.runtime.action_log._packed import packed_event, unpacked_event
from tests.runtime.action_log.records import ident

# pickle (protocol 5) of (1, (0, "llm", "d0", "r0", None)): a partial call as logs held it
# before calls had a duration.
UNTIMED_CALL = bytes.fromhex(
    "8005951b000000000000004b01284b008c036c6c6d948c026430948c027230944e749486942e"
)
# pickle of (1, {"sensory": ..., "short_term": set "a" to 1, "events": (), "calls": one
# untimed call}): a completed record of the same age.
UNTIMED_RECORD = bytes.fromhex(
    "8005955d000000000000004b017d94288c0773656e736f727994897d942987948c0a73686f72745f74"
    "65726d94897d948c0161944b01732987948c066576656e747394298c0563616c6c7394284b008c036c"
    "6c6d948c026430948c027230944e749485947586942e"
)


def test_untimed_payloads_read_back_without_a_duration() -> None:
    serializer = PickleSerializer()
    assert decode_call(serializer, UNTIMED_CALL) == DurableCall(0, "llm", "d0", "r0")
    record = decode_record(serializer, ident(), 7, UNTIMED_RECORD)
    assert record.short_term == MemoryDelta(False, {"a": 1}, ())
    assert record.calls == (DurableCall(0, "llm", "d0", "r0", None, None),)


def test_an_untimed_call_is_written_as_before() -> None:
    """Without a duration the bytes are the old layout's, so older readers still read them."""
    serializer = PickleSerializer()
    assert encode_call(serializer, DurableCall(0, "llm", "d0", "r0")) == UNTIMED_CALL
    record = decode_record(serializer, ident(), 7, UNTIMED_RECORD)
    assert encode_record(serializer, record) == UNTIMED_RECORD


def test_a_timed_call_round_trips_its_duration() -> None:
    serializer = PickleSerializer()
    timed = dataclasses.replace(DurableCall(0, "llm", "d0", "r0"), duration_ms=3.5)
    assert decode_call(serializer, encode_call(serializer, timed)) == timed


# pickle of (1, {..., "events": (OutputEvent(id=UUID(int=EVENT_BITS), output=("k", 1)),),
# "calls": ()}): a completed record whose event went as the pydantic model itself, as every
# record did before events were packed (2026-11-28).
EVENT_BITS = 0x1234_5678_9ABC_4DEF_8123_4567_89AB_CDEF
MODEL_EVENT_RECORD = bytes.fromhex(
    "80059517010000000000004b017d94288c0773656e736f727994897d942987948c0a73686f72745f"
    "7465726d94897d942987948c066576656e7473948c18666c696e6b5f6167656e74732e6170692e5f"
    "6576656e7473948c0b4f75747075744576656e749493942981947d94288c085f5f646963745f5f94"
    "7d94288c026964948c0475756964948c04555549449493942981947d948c03696e74948a10efcdab"
    "8967452381ef4dbc9a7856341273628c066f7574707574948c016b944b018694758c125f5f707964"
    "616e7469635f65787472615f5f944e8c175f5f707964616e7469635f6669656c64735f7365745f5f"
    "948f9428680f6816908c145f5f707964616e7469635f707269766174655f5f944e756285948c0563"
    "616c6c7394297586942e"
)


class Noted(Event):
    """An event of the test's own, with a nested value and a default left unset."""

    notes: list[dict[str, int]]
    level: str = "info"


class Tagged(Event):
    """An event with a private attribute: it goes as the model itself."""

    text: str
    _seen: int = PrivateAttr(default=0)


def _record(*events: Event) -> ActionRecord:
    return ActionRecord(ident(), MemoryDelta(), MemoryDelta(), events, (), 7)


def test_a_record_whose_events_went_as_models_reads_back() -> None:
    record = decode_record(PickleSerializer(), ident(), 7, MODEL_EVENT_RECORD)
    assert record.events == (OutputEvent(id=UUID(int=EVENT_BITS), output=("k", 1)),)
    assert record.events[0].model_fields_set == {"id", "output"}


def test_events_go_packed_and_come_back_equal_field_for_field() -> None:
    serializer = PickleSerializer()
    events = (
        OutputEvent(output=("k", 1)),
        Noted(notes=[{"a": 1}]),
        Tagged(text="x"),
    )
    payload = encode_record(serializer, _record(*events))
    back = decode_record(serializer, ident(), 7, payload).events
    assert back == events
    for original, read in zip(events, back, strict=True):
        assert type(read) is type(original)
        assert read.model_fields_set == original.model_fields_set
        assert list(read.__dict__) == list(original.__dict__)  # field order kept
        assert type(read.id) is UUID and read.id == original.id
    assert back[1].model_dump() == {"id": events[1].id, "notes": [{"a": 1}], "level": "info"}
    # Packed: no pydantic state in the payload but the one event with a private attribute's.
    assert payload.count(b"__pydantic_fields_set__") == 1
    assert packed_event(events[2]) is None
    assert unpacked_event(packed_event(events[1])) == events[1]


def test_another_serializer_gets_the_events_themselves() -> None:
    """Packing is the pickle serializer's: a serializer of the user's own sees the models
    it has always seen."""

    class Recording(PickleSerializer):
        def __init__(self) -> None:
            self.seen: list[Any] = []

        def dumps(self, obj: Any) -> bytes:
            self.seen.append(obj)
            return super().dumps(obj)

    serializer = Recording()
    event = OutputEvent(output=1)
    payload = encode_record(serializer, _record(event))
    assert serializer.seen[-1][1]["events"] == (event,)
    assert decode_record(serializer, ident(), 7, payload).events == (event,)


def test_a_payload_of_a_later_version_is_refused_by_name() -> None:
    """A log written by a later release is not misread: its version is read back."""
    serializer = PickleSerializer()
    later_call = serializer.dumps((2, (0, "llm", "d0", "r0", None)))
    with pytest.raises(ActionLogError, match="payload version 2"):
        decode_call(serializer, later_call)
    _, body = serializer.loads(UNTIMED_RECORD)
    with pytest.raises(ActionLogError, match="payload version 2"):
        decode_record(serializer, ident(), 7, serializer.dumps((2, body)))
