"""Writes the golden fixtures of the action log's payloads as release 0.2.0 writes them.

``python -m tests.runtime.action_log.make_golden tests/runtime/golden 0.2.0``, run once with
the ``flink_agents`` of main at ee0eb53 (``PYTHONHASHSEED=0``), wrote
``tests/runtime/golden/action-log-0.2.0-*.payload``: one file per payload kind the log
stores (a durable call of an unfinished action: untimed, timed, failed, failed with an
exception that does not pickle, holding a chat reply; a completed action's record: bare,
with untimed calls, with user events, and with everything a record may hold: memory deltas,
packed events, an event kept as its model, calls with a failure, their durations, and the
values the deltas replaced). Written by the pickle serializer (the default).

Never run again: each file is what its release wrote, and the current code must keep
reading it (the script refuses to overwrite one). A later release whose payloads change adds
its own files beside these (``action-log-RELEASE-*``) from a copy of this script.
``calls()`` and ``records()`` are what was written, and what reading the files gives back.
"""

from __future__ import annotations

import sys
from pathlib import Path
from uuid import UUID

from flink_agents.api import ChatMessage, ChatResponse, OutputEvent, TokenUsage
from flink_agents.memory import MemoryDelta, ObjectMarker
from flink_agents.runtime.action_log import (
    ActionIdentity,
    DurableCall,
    PickleSerializer,
    RecordedError,
)
from flink_agents.runtime.action_log._base import ActionRecord, encode_call, encode_record
from tests.runtime.golden.values import (
    FLAGGED,
    NOTE,
    SENT,
    KeywordOnly,
    Note,
    QuotaExceeded,
)

IDENTITY = ActionIdentity("job-1", '"u1"', 3, 2, "answer")
EPOCH = 1_700_000_000_000
CHAT = "flink_agents.integrations.chat._openai:OpenAIChatModel.chat"
TOOL = "flink_agents.api._tools:FunctionTool.call"
DIGEST = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"


def calls() -> dict[str, DurableCall]:
    """The partial calls, by fixture name."""
    reply = ChatResponse(
        message=ChatMessage(role="assistant", content="hello"),
        usage=TokenUsage(prompt_tokens=5, completion_tokens=2, total_tokens=7),
        model="scripted",
        finish_reason="stop",
    )
    return {
        "call-untimed": DurableCall(0, TOOL, DIGEST, {"rows": [1, 2]}),
        "call-timed": DurableCall(1, TOOL, DIGEST, ("a", 1.5, None), None, 12.5),
        "call-failed": DurableCall(2, TOOL, DIGEST, None, QuotaExceeded("over quota"), 3.25),
        "call-failed-unpicklable": DurableCall(3, TOOL, DIGEST, None, KeywordOnly(code=7), 1.0),
        "call-chat-response": DurableCall(4, CHAT, DIGEST, reply, None, 250.0),
    }


def _single_field_set(event: OutputEvent | Note) -> OutputEvent | Note:
    """``event`` with only its first non-id field set: a packed event whose set fields
    pickle in one order (a set of several names iterates in an order that varies by process)."""
    fields = dict(event.__dict__)
    first = next(name for name in fields if name != "id")
    return type(event).model_construct(_fields_set={first}, **fields)


def records() -> dict[str, ActionRecord]:
    """The completed records, by fixture name."""
    output = _single_field_set(
        OutputEvent(id=UUID("3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f"), output={"answer": 42})
    )
    note = _single_field_set(NOTE)
    failed = DurableCall(1, TOOL, DIGEST, None, QuotaExceeded("over quota"), 0.5)
    return {
        "record-bare": ActionRecord(IDENTITY, MemoryDelta(), MemoryDelta(), (), (), EPOCH),
        "record-untimed-calls": ActionRecord(
            IDENTITY,
            MemoryDelta(),
            MemoryDelta(False, {"count": 1}, ()),
            (output,),
            (DurableCall(0, TOOL, DIGEST, "r0"), DurableCall(1, TOOL, DIGEST, "r1")),
            EPOCH,
        ),
        "record-full": ActionRecord(
            IDENTITY,
            MemoryDelta(True, {"scratch": [1, 2]}, ()),
            MemoryDelta(
                False,
                {"profile": ObjectMarker(("name",)), "profile.name": "Ada", "count": 2},
                ("old",),
            ),
            (output, note, FLAGGED),
            (DurableCall(0, TOOL, DIGEST, {"rows": [1]}, None, 7.0), failed),
            EPOCH,
            previous=({"scratch": None}, {"profile": None, "count": 1, "old": "x"}),
        ),
        "record-events": ActionRecord(
            IDENTITY, MemoryDelta(), MemoryDelta(), (NOTE, SENT), (), EPOCH
        ),
    }


def unpicklable_as_recorded() -> RecordedError:
    """What ``call-failed-unpicklable``'s error reads back as."""
    return RecordedError("tests.runtime.golden.values.KeywordOnly", "failed with code 7")


def main(out: Path, release: str) -> None:
    serializer = PickleSerializer()
    written = {name: encode_call(serializer, call) for name, call in calls().items()}
    written |= {name: encode_record(serializer, rec) for name, rec in records().items()}
    for name, payload in written.items():
        target = out / f"action-log-{release}-{name}.payload"
        if target.exists():
            raise SystemExit(f"{target} exists: a fixture is never regenerated")
        target.write_bytes(payload)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
