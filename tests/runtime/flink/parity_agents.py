"""Agents that the parity suite runs on the local runner and on MiniCluster.

Each output carries its key, so outputs can be grouped per key, and the last output of a
key carries a snapshot of its short-term memory.
"""

import time

from flink_agents.api import Agent, Event, InputEvent, OutputEvent, action
from flink_agents.memory import to_dict


class Noted(Event):
    value: int


class MemoryOpsAgent(Agent):
    """Nested objects, replacement, deletion, copies, and sensory memory across actions."""

    @action(InputEvent)
    @staticmethod
    def write(event: InputEvent, ctx) -> None:
        record, stm = event.input, ctx.short_term_memory
        ctx.sensory_memory.set("fields_at_start", ctx.sensory_memory.get_field_names())
        ctx.sensory_memory.set("scratch.value", record["n"])
        profile = stm.get_object("profile") or stm.new_object("profile")
        profile.set("count", (profile.get("count") or 0) + 1)
        profile.set(f"by_op.{record['op']}", record["n"])
        if record["op"] == "reset":
            stm.new_object("profile.by_op")
        elif record["op"] == "drop":
            stm.delete("profile.by_op")
        elif record["op"] == "copy":
            stm.set("backup", profile)
        elif record["op"] == "flatten":
            stm.set("backup", record["n"])
        ctx.send_event(Noted(value=record["n"]))

    @action(Noted)
    @staticmethod
    def report(event: Noted, ctx) -> None:
        ctx.send_event(
            OutputEvent(
                output={
                    "key": ctx.key,
                    "n": event.value,
                    "sensory_at_start": ctx.sensory_memory.get("fields_at_start"),
                    "scratch": ctx.sensory_memory.get("scratch.value"),
                    "memory": to_dict(ctx.short_term_memory),
                }
            )
        )


def slow_echo(value: int, delay_ms: int) -> int:
    time.sleep(delay_ms / 1000)
    return value


class AsyncOrderAgent(Agent):
    """Durable calls with delays that differ per record, so keys finish out of order; a
    record with no delay makes no call, so its run never parks (it may queue behind one)."""

    @action(InputEvent)
    @staticmethod
    async def call(event: InputEvent, ctx) -> None:
        record = event.input
        if record["delay_ms"]:
            value = await ctx.durable_execute_async(slow_echo, record["n"], record["delay_ms"])
        else:
            value = record["n"]
        seen = [*(ctx.short_term_memory.get("seen") or []), value]
        ctx.short_term_memory.set("seen", seen)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": value, "seen": seen}))


class FanOutAgent(Agent):
    """A run emits as many outputs as the record says: zero, one or many."""

    @action(InputEvent)
    @staticmethod
    def fan_out(event: InputEvent, ctx) -> None:
        record = event.input
        total = (ctx.short_term_memory.get("total") or 0) + record["count"]
        ctx.short_term_memory.set("total", total)
        for i in range(record["count"]):
            ctx.send_event(OutputEvent(output={"key": ctx.key, "n": record["n"], "part": i}))
