"""Agents, events, key selectors and stream helpers of the bad-input suite.

Module-level so that plans name them as ``tests.bad_input.agents:...`` and Flink's Python
workers import them by name. One agent, ``CatalogueAgent``, plays every bad case: the
record's ``case`` field says what its run does wrong.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from flink_agents.api import Agent, Event, InputEvent, OutputEvent, action


class Wait(Event):
    """Hands an awaiting case to the async action."""

    what: str


class Ping(Event):
    """Listened to by the action that sends it: a run that never ends on its own."""

    n: int


class HoldsACallable(BaseModel):
    """A pydantic model that validates, but whose value cannot be serialized."""

    call: Callable[[], int]


class HoldsASocket(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    sock: socket.socket


def unstorable(kind: str) -> tuple[Any, Callable[[], None]]:
    """A value memory must refuse, and how to release it afterwards."""
    if kind == "lambda":
        return (lambda: 1), _nothing
    if kind == "socket":
        sock = socket.socket()
        return sock, sock.close
    if kind == "model_with_lambda":
        return HoldsACallable(call=lambda: 1), _nothing
    if kind == "model_with_socket":
        sock = socket.socket()
        return HoldsASocket(sock=sock), sock.close
    if kind == "int_keys":
        return {1: "one"}, _nothing
    if kind == "self_containing":
        cyclic: list[Any] = []
        cyclic.append(cyclic)
        return cyclic, _nothing
    raise ValueError(f"no unstorable value of kind {kind!r}")


def _nothing() -> None:
    return None


class CatalogueAgent(Agent):
    """Each run appends ``n`` to the key's ``seen`` list (short-term memory), does what its
    ``case`` asks, then outputs ``{user, n, seen}``. A failed action's writes are discarded,
    so later runs of the key show exactly the runs that succeeded (the awaiting and looping
    cases fail in a later action and write nothing before)."""

    @action(InputEvent)
    @staticmethod
    def handle(event: InputEvent, ctx) -> None:
        record = event.input
        case = record.get("case", "ok")
        if case in ("sleep", "asyncio_future"):
            ctx.send_event(Wait(what=case))  # the async action fails the run
            return
        if case == "loop":
            ctx.send_event(Ping(n=0))  # the run never ends on its own
            return
        seen = [*(ctx.short_term_memory.get("seen") or []), record["n"]]
        ctx.short_term_memory.set("seen", seen)
        output: dict[str, Any] = {"user": ctx.key, "n": record["n"], "seen": seen}
        if "text" in record:
            output["text_length"] = len(record["text"])
        if case == "raise":
            raise ValueError(f"record {record['n']} is bad")
        if case == "flaky":
            counter = Path(record["counter_dir"]) / str(record["n"])
            attempts = int(counter.read_text()) + 1 if counter.exists() else 1
            counter.write_text(str(attempts))
            if attempts <= record["fail_times"]:
                raise ConnectionError(f"attempt {attempts} of record {record['n']} failed")
            output["attempts"] = attempts
        elif case == "send_dict":
            ctx.send_event({"output": "not an event"})
        elif case == "send_input":
            ctx.send_event(InputEvent(input="again"))
        elif case == "path":
            ctx.short_term_memory.set(record["path"], 1)
        elif case == "unstorable":
            value, release = unstorable(record["kind"])
            try:
                ctx.short_term_memory.set("slot", value)
            finally:
                release()
        elif case == "big_write":
            ctx.short_term_memory.set("blob", b"\x01" * record["size"])
            output["blob"] = record["size"]
        elif case == "big_read":
            blob = ctx.short_term_memory.get("blob")
            output["blob"] = len(blob) if blob is not None else None
            output["intact"] = blob == b"\x01" * len(blob or b"")
        ctx.send_event(OutputEvent(output=output))

    @action(Wait)
    @staticmethod
    async def wait(event: Wait, ctx) -> None:
        if event.what == "sleep":
            await asyncio.sleep(0.1)
        else:
            loop = asyncio.new_event_loop()
            try:
                await loop.create_future()
            finally:
                loop.close()
        ctx.send_event(OutputEvent(output="unreachable"))

    @action(Ping)
    @staticmethod
    def again(event: Ping, ctx) -> None:
        ctx.send_event(Ping(n=event.n + 1))


def user_or_raise(record: dict[str, Any]) -> Any:
    """A key selector that raises for records marked ``bad_selector``."""
    if record.get("bad_selector"):
        raise ValueError(f"record {record['n']} cannot be keyed")
    return record["user"]


class Tag:
    """``value -> (tag, value)``: several streams of one job collected as one."""

    def __init__(self, tag: str) -> None:
        self.tag = tag

    def __call__(self, value: Any) -> tuple[str, Any]:
        return (self.tag, value)


def parse_json(text: str) -> Any:
    return json.loads(text)
