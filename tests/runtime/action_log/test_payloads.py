"""Payloads written before durable calls were timed still read back (golden bytes)."""

from __future__ import annotations

import dataclasses

from flink_agents.memory import MemoryDelta
from flink_agents.runtime.action_log import DurableCall, PickleSerializer
from flink_agents.runtime.action_log._base import (
    decode_call,
    decode_record,
    encode_call,
    encode_record,
)
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
