"""An agent that leaves something of its key everywhere we write, for the erasure tests
(``ForgetKey``): short-term memory, a durable call in the action log, a long-term memory
item, a knowledge item, a scheduled follow-up and a run waiting for a signal."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from flink_agents.api import Agent, Event, ForgetKey, InputEvent, OutputEvent, action

RELEASE = threading.Event()
"""Set to let ``held`` durable calls return (``hold`` records): the run parks meanwhile."""
RELEASE.set()


def shout(text: str, hold: bool = False) -> str:
    """The durable call every record makes (recorded in the action log with its text)."""
    if hold:
        RELEASE.wait(30)
    return text.upper()


class FollowUp(Event):
    user: str
    text: str


class Answer(Event):
    text: str


class Remembers(Agent):
    """``input``: {"user", "text", "hold": bool, "follow_up": bool, "ask": bool,
    "long_term": bool, "id", "crash"}. Each record counts itself and keeps its text in
    short-term memory, shouts it (a durable call), and outputs ``{"user", "text", "count"}``
    (and its ``id``, if it has one); with ``long_term`` it adds the text to the key's
    ``notes`` memory set and to the shared ``faq`` knowledge set; with ``follow_up`` it
    schedules a ``FollowUp`` one day later; with ``ask`` it then waits up to four hours for
    an ``Answer`` and outputs it. With ``crash`` (a marker file's path) it fails, once: the
    job fails with it, and Flink restores its last checkpoint."""

    @action(InputEvent)
    @staticmethod
    async def note(event: InputEvent, ctx) -> None:
        record = event.input
        if record.get("crash"):
            crash_once(Path(record["crash"]))
        memory = ctx.short_term_memory
        count = (memory.get("count") or 0) + 1
        memory.set("count", count)
        memory.set("notes.last", record["text"])
        loud = await ctx.durable_execute_async(shout, record["text"], record.get("hold", False))
        if record.get("long_term"):
            ctx.long_term_memory.create_memory_set("notes", str, capacity=10).add(record["text"])
            ctx.knowledge.create_knowledge_set("faq").add(record["text"])
        if record.get("follow_up"):
            ctx.schedule(
                FollowUp(user=record["user"], text=record["text"]), delay=timedelta(days=1)
            )
        output = {"user": record["user"], "text": loud, "count": count}
        if "id" in record:
            output["id"] = record["id"]
        ctx.send_event(OutputEvent(output=output))
        if record.get("ask"):
            answer = await ctx.wait_for(Answer, timeout=timedelta(hours=4))
            text = None if answer is None else answer.text
            seen = ctx.short_term_memory.get("notes.last")
            ctx.send_event(
                OutputEvent(output={"user": record["user"], "answer": text, "last": seen})
            )

    @action(FollowUp)
    @staticmethod
    def follow_up(event: FollowUp, ctx) -> None:
        count = ctx.short_term_memory.get("count")
        ctx.send_event(
            OutputEvent(output={"user": event.user, "follow_up": event.text, "count": count})
        )


def crash_once(marker: Path) -> None:
    """Fail the first time (the marker, renamed into place, says when)."""
    if not marker.exists():
        written = marker.with_suffix(".writing")
        written.write_text(str(time.time()))
        written.rename(marker)
        raise RuntimeError("an injected failure")


def parse_record(line: str) -> Any:
    """A JSON line of the job's input: ``{"forget": KEY, "request_id": ...}`` is a
    ``ForgetKey``, anything else the record as it is."""
    record = json.loads(line)
    if "forget" in record:
        return ForgetKey(record["forget"], request_id=record.get("request_id"))
    return record
