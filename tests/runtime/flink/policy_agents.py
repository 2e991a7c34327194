"""Agents for the dispatcher's failure policies, draining and throughput tests."""

import threading
import time
from pathlib import Path

from flink_agents.api import Agent, InputEvent, OutputEvent, action


class FlakyAgent(Agent):
    """Fails while a per-record attempt counter (a file, outside the job) is below
    ``record["fail_times"]``; the counter directory comes from the agent config."""

    @action(InputEvent)
    @staticmethod
    def flaky(event: InputEvent, ctx) -> None:
        record = event.input
        ctx.short_term_memory.set("attempted", record["n"])
        counter = Path(ctx.config["counter_dir"]) / f"{record['n']}"
        attempts = int(counter.read_text()) + 1 if counter.exists() else 1
        counter.write_text(str(attempts))
        if attempts <= record["fail_times"]:
            raise RuntimeError(f"transient failure {attempts} of record {record['n']}")
        done = [*(ctx.short_term_memory.get("done") or []), record["n"]]
        ctx.short_term_memory.set("done", done)
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": record["n"], "done": done}))


def sleep_then(value: int, seconds: float) -> int:
    time.sleep(seconds)
    return value


class SlowAgent(Agent):
    """Every run waits on a durable call of ``record["seconds"]``."""

    @action(InputEvent)
    @staticmethod
    async def wait(event: InputEvent, ctx) -> None:
        record = event.input
        value = await ctx.durable_execute_async(sleep_then, record["n"], record["seconds"])
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": value}))


CALL_FINISHED = threading.Event()
"""Set by ``finish_call`` (in the worker that runs the job: thread mode runs it in the
TaskManager, where the actions run too)."""


def finish_call(value: int) -> int:
    CALL_FINISHED.set()
    return value


class CallThenTrafficAgent(Agent):
    """A ``"call"`` record awaits one quick durable call; every other record waits (in its
    action, up to 10 s) until that call has finished, then 5 ms more, and has no call."""

    @action(InputEvent)
    @staticmethod
    async def handle(event: InputEvent, ctx) -> None:
        record = event.input
        if record["kind"] == "call":
            await ctx.durable_execute_async(finish_call, record["n"])
        else:
            CALL_FINISHED.wait(10)
            time.sleep(0.005)
        ctx.send_event(OutputEvent(output=record["n"]))
