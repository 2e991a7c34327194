"""Agents that the parity suite runs on the local runner and on MiniCluster.

Each output carries its key, so outputs can be grouped per key, and the last output of a
key carries a snapshot of its short-term memory.
"""

import asyncio
import sys
import time
from datetime import timedelta
from pathlib import Path

from flink_agents.api import (
    Agent,
    Event,
    InputEvent,
    OutputEvent,
    ResourceType,
    SubAgent,
    action,
    resource,
)
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


async def slow_echo_async(value: int, delay_ms: int) -> int:
    """``slow_echo`` as an ``async def`` function (an async client's call)."""
    await asyncio.sleep(delay_ms / 1000)
    return value


class AsyncOrderAgent(Agent):
    """Durable calls with delays that differ per record, so keys finish out of order; a
    record with no delay makes no call, so its run never parks (it may queue behind one).
    Every third call is of an ``async def`` function."""

    @action(InputEvent)
    @staticmethod
    async def call(event: InputEvent, ctx) -> None:
        record = event.input
        if record["delay_ms"]:
            echo = slow_echo_async if record["n"] % 3 == 0 else slow_echo
            value = await ctx.durable_execute_async(echo, record["n"], record["delay_ms"])
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


# -- failure paths, async latencies and options: one agent, dispatching on the record's case --


def failing(n: int) -> bool:
    """The deterministic failure trigger of the ``CaseAgent``'s failing cases."""
    return n % 5 == 3


def square(n: int) -> int:
    return n * n


def square_later(n: int, delay_ms: int) -> int:
    time.sleep(delay_ms / 1000)
    return n * n


def count_call(path: str, delay_ms: int = 0) -> int:
    """A durable call with a visible side effect: how many times it ran for ``path``."""
    time.sleep(delay_ms / 1000)
    return _bump(Path(path))


def _bump(path: Path) -> int:
    """Add one to the count in ``path`` (a file outside the job: Flink workers are other
    processes) and return it; also notes when, for backoff checks."""
    with path.open("a") as file:
        file.write(f"{time.time()}\n")
    return len(path.read_text().splitlines())


class Explode(Event):
    n: int


class SyncCall(Event):
    n: int


class AsyncCall(Event):
    n: int
    delay_ms: int


class Await(Event):
    n: int
    delay_ms: int
    calls: int


class Spin(Event):
    round: int


class Flaky(Event):
    n: int
    fail_times: int
    call: str  # "", "sync" or "async": a durable call before the failure


class CaseAgent(Agent):
    """Dispatches on ``record["case"]``; each output carries the key, the record's ``n`` and
    its case. Failing cases fail when ``failing(n)``, after writing memory in the failing
    action (which must not remain) and after an earlier action's writes (which stay):

    - ``ops``: memory writes over two actions, sensory memory between them;
    - ``fail``: the second action raises (the first already emitted an output);
    - ``boom``: the input action itself raises, after writing memory;
    - ``durable-sync`` / ``durable-async``: the action raises after ``ctx.durable_execute``
      / ``await ctx.durable_execute_async``;
    - ``async``: one or two durable calls of ``delay_ms`` (never fails);
    - ``loop``: sends the event it listens to forever (the run's step cap stops it);
    - ``flaky``: fails its first ``fail_times`` attempts (a per-record counter file under
      ``config["counter_dir"]``), optionally after a durable call that counts its own runs;
    - ``probe``: outputs the key's short-term memory and its sensory memory's fields.
    """

    @action(InputEvent)
    @staticmethod
    def route(event: InputEvent, ctx) -> None:
        record, stm = event.input, ctx.short_term_memory
        case, n = record["case"], record["n"]
        if case == "probe":
            ctx.send_event(
                OutputEvent(
                    output={
                        "key": ctx.key,
                        "n": n,
                        "case": case,
                        "memory": to_dict(stm),
                        "sensory": ctx.sensory_memory.get_field_names(),
                    }
                )
            )
            return
        stm.set("runs", (stm.get("runs") or 0) + 1)
        stm.set(f"cases.{case}", n)
        ctx.sensory_memory.set("input.n", n)
        if case == "ops":
            profile = stm.get_object("profile") or stm.new_object("profile")
            profile.set("last", n)
            if n % 3 == 0:
                stm.new_object("profile.extra").set("n", n)
            elif n % 3 == 1:
                stm.delete("profile.extra")
            ctx.send_event(Explode(n=-1))  # the second action, which never fails for n < 0
        elif case == "fail":
            ctx.send_event(
                OutputEvent(output={"key": ctx.key, "n": n, "case": case, "at": "route"})
            )
            ctx.send_event(Explode(n=n))
        elif case == "boom":
            if failing(n):
                raise RuntimeError(f"boom at record {n}")
            ctx.send_event(OutputEvent(output={"key": ctx.key, "n": n, "case": case}))
        elif case == "durable-sync":
            ctx.send_event(SyncCall(n=n))
        elif case == "durable-async":
            ctx.send_event(AsyncCall(n=n, delay_ms=record["delay_ms"]))
        elif case == "async":
            ctx.send_event(Await(n=n, delay_ms=record["delay_ms"], calls=1 + n % 2))
        elif case == "loop":
            ctx.send_event(Spin(round=0))
        elif case == "flaky":
            ctx.send_event(Flaky(n=n, fail_times=record["fail_times"], call=record["call"]))
        else:
            raise ValueError(f"unknown case {case!r}")

    @action(Explode)
    @staticmethod
    def explode(event: Explode, ctx) -> None:
        stm, n = ctx.short_term_memory, event.n
        stm.set("partial", n)
        if n < 0:  # the second step of "ops"
            seen = ctx.sensory_memory.get("input.n")
            stm.set("ops", [*(stm.get("ops") or []), seen])
            ctx.send_event(OutputEvent(output={"key": ctx.key, "n": seen, "case": "ops"}))
            return
        if failing(n):
            raise ValueError(f"record {n} exploded")
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": n, "case": "fail", "at": "end"}))

    @action(SyncCall)
    @staticmethod
    def call_sync(event: SyncCall, ctx) -> None:
        value = ctx.durable_execute(square, event.n)
        ctx.short_term_memory.set(f"squares.n{event.n}", value)
        if failing(event.n):
            raise RuntimeError(f"failed after the sync call of record {event.n}")
        ctx.send_event(
            OutputEvent(output={"key": ctx.key, "n": event.n, "case": "durable-sync", "v": value})
        )

    @action(AsyncCall)
    @staticmethod
    async def call_async(event: AsyncCall, ctx) -> None:
        value = await ctx.durable_execute_async(square_later, event.n, event.delay_ms)
        ctx.short_term_memory.set(f"squares.n{event.n}", value)
        if failing(event.n):
            raise RuntimeError(f"failed after the async call of record {event.n}")
        ctx.send_event(
            OutputEvent(output={"key": ctx.key, "n": event.n, "case": "durable-async", "v": value})
        )

    @action(Await)
    @staticmethod
    async def wait(event: Await, ctx) -> None:
        values = []
        for i in range(event.calls):
            values.append(await ctx.durable_execute_async(slow_echo, event.n + i, event.delay_ms))
        seen = [*(ctx.short_term_memory.get("seen") or []), event.n]
        ctx.short_term_memory.set("seen", seen)
        ctx.send_event(
            OutputEvent(
                output={"key": ctx.key, "n": event.n, "case": "async", "v": values, "seen": seen}
            )
        )

    @action(Spin)
    @staticmethod
    def spin(event: Spin, ctx) -> None:
        ctx.short_term_memory.set("spins", event.round + 1)
        ctx.send_event(Spin(round=event.round + 1))

    @action(Flaky)
    @staticmethod
    async def flaky(event: Flaky, ctx) -> None:
        counters = Path(ctx.config["counter_dir"])
        calls = None
        if event.call == "sync":
            calls = ctx.durable_execute(count_call, str(counters / f"{event.n}.calls"))
        elif event.call == "async":
            calls = await ctx.durable_execute_async(
                count_call, str(counters / f"{event.n}.calls"), 5
            )
        ctx.short_term_memory.set(f"flaky.n{event.n}", calls)
        attempt = _bump(counters / f"{event.n}.attempts")
        if attempt <= event.fail_times:
            raise RuntimeError(f"attempt {attempt} of record {event.n} failed")
        ctx.send_event(
            OutputEvent(output={"key": ctx.key, "n": event.n, "case": "flaky", "calls": calls})
        )


def key_of_case(record: dict) -> str:
    """A key selector function (not a field name): raises for records without ``k``."""
    return record["k"]


class LongTermAgent(Agent):
    """Long-term memory per key and knowledge shared by every key; outputs are what was
    found (items and sources, never ids or times, which differ between runners)."""

    @action(InputEvent)
    @staticmethod
    def handle(event: InputEvent, ctx) -> None:
        request = event.input
        notes = ctx.long_term_memory.create_memory_set("notes", str, capacity=50)
        facts = ctx.knowledge.create_knowledge_set("facts")
        op = request["op"]
        if op == "remember":
            notes.add(request["text"], tags=request.get("tags"), source=f"user:{ctx.key}")
            answer = notes.size()
        elif op == "ask":
            answer = [[item.item, item.source] for item in notes.search(request["text"], limit=2)]
        elif op == "recall":
            found = notes.retrieve(request["tags"])
            answer = found.item if found else None
        elif op == "forget":
            notes.delete()
            answer = notes.size()
        elif op == "teach":
            facts.add(request["text"])
            answer = facts.size()
        elif op == "look_up":
            answer = [item.value for item in facts.search(request["text"], limit=1)]
        elif op == "probe":
            answer = to_dict(ctx.short_term_memory)
        else:
            raise ValueError(f"unknown op {op!r}")
        ctx.short_term_memory.set("ops", [*(ctx.short_term_memory.get("ops") or []), op])
        if request.get("fail"):
            raise RuntimeError(f"failed after {op} of record {request['id']}")
        ctx.send_event(
            OutputEvent(output={"key": ctx.key, "id": request["id"], "op": op, "answer": answer})
        )


class ModeProbeAgent(Agent):
    """Says whether the Python code runs inside the JVM (PyFlink's thread mode)."""

    @action(InputEvent)
    @staticmethod
    def probe(event: InputEvent, ctx) -> None:
        ctx.send_event(OutputEvent(output={"key": ctx.key, "thread_mode": "pemja" in sys.modules}))


# -- fan-out groups: async actions listening to one event, run side by side ------------------


class Gathered(Event):
    n: int
    delays: list[int]
    fail: str | None = None


class Answered(Event):
    n: int
    member: str


class ParallelAgent(Agent):
    """The input sends ``Gathered``; three async actions listen to it (a fan-out group
    under ``parallel-actions``). Each reads ``total``, awaits a call of its own delay,
    writes ``total``, ``last`` and fields of its own under a shared object, outputs what it
    saw and sends ``Answered``; the member named by ``fail`` raises after its call. ``probe``
    records output the key's short-term memory."""

    @action(InputEvent)
    @staticmethod
    def route(event: InputEvent, ctx) -> None:
        record, stm = event.input, ctx.short_term_memory
        if record.get("case") == "probe":
            output = {"key": ctx.key, "n": record["n"], "case": "probe", "memory": to_dict(stm)}
            ctx.send_event(OutputEvent(output=output))
            return
        stm.set("runs", (stm.get("runs") or 0) + 1)
        ctx.send_event(Gathered(n=record["n"], delays=record["delays"], fail=record["fail"]))

    @action(Gathered)
    @staticmethod
    async def ask_a(event: Gathered, ctx) -> None:
        await _gathered(event, ctx, "a", 0)

    @action(Gathered)
    @staticmethod
    async def ask_b(event: Gathered, ctx) -> None:
        await _gathered(event, ctx, "b", 1)

    @action(Gathered)
    @staticmethod
    async def ask_c(event: Gathered, ctx) -> None:
        await _gathered(event, ctx, "c", 2)

    @action(Answered)
    @staticmethod
    def note(event: Answered, ctx) -> None:
        total = ctx.short_term_memory.get("total")
        output = {"key": ctx.key, "n": event.n, "after": event.member, "total": total}
        ctx.send_event(OutputEvent(output=output))


async def _gathered(event: Gathered, ctx, member: str, index: int) -> None:
    stm = ctx.short_term_memory
    seen = stm.get("total") or 0
    value = await ctx.durable_execute_async(square_later, event.n, event.delays[index])
    stm.set("total", seen + 1)
    stm.set("last", member)
    answers = stm.get_object("answers") or stm.new_object("answers")
    answers.set(f"{member}{event.n % 3}", value)
    if event.fail == member:
        raise RuntimeError(f"member {member} failed on record {event.n}")
    ctx.send_event(
        OutputEvent(output={"key": ctx.key, "n": event.n, "member": member, "seen": seen})
    )
    ctx.send_event(Answered(n=event.n, member=member))


# -- sub-agents: an action runs another agent for its key ------------------------------------


class Lookup(Agent):
    """The sub-agent: counts its questions in its short-term memory, squares the number
    with a durable call of the record's delay, and outputs both."""

    @action(InputEvent)
    @staticmethod
    async def look(event: InputEvent, ctx) -> None:
        stm = ctx.short_term_memory
        asked = (stm.get("asked") or 0) + 1
        stm.set("asked", asked)
        n, delay_ms = event.input
        square = await ctx.durable_execute_async(square_later, n, delay_ms)
        ctx.send_event(OutputEvent(output={"square": square, "asked": asked}))


class DelegatingAgent(Agent):
    """Runs ``Lookup`` with a memory of its own or sharing this agent's, keeps what it
    found, and fails after the sub-run for ``failing(n)`` (its writes must not stay)."""

    @resource(ResourceType.TOOL)
    @staticmethod
    def lookup() -> SubAgent:
        return SubAgent(Lookup)

    @resource(ResourceType.TOOL)
    @staticmethod
    def shared_lookup() -> SubAgent:
        return SubAgent(Lookup, share_short_term_memory=True)

    @action(InputEvent)
    @staticmethod
    async def delegate(event: InputEvent, ctx) -> None:
        record, stm = event.input, ctx.short_term_memory
        if record.get("case") == "probe":
            output = {"key": ctx.key, "n": record["n"], "case": "probe", "memory": to_dict(stm)}
            ctx.send_event(OutputEvent(output=output))
            return
        name = "shared_lookup" if record["shared"] else "lookup"
        found = await ctx.run_agent_async(name, (record["n"], record["delay_ms"]))
        stm.set("found", found)
        if failing(record["n"]):
            raise RuntimeError(f"failed after the sub-run of record {record['n']}")
        ctx.send_event(OutputEvent(output={"key": ctx.key, "n": record["n"], "found": found}))


# -- scheduled events -------------------------------------------------------------------------


class Reminder(Event):
    """Scheduled by ``SchedulingAgent`` for its record ``n``; ``rounds`` more follow it, a
    day apart (-1: without end)."""

    n: int
    round: int = 0
    rounds: int = 0


class Chase(Event):
    """Scheduled by ``SchedulingAgent``; its action is ``async def`` and makes a durable call."""

    n: int
    delay_ms: int


def _pending(ctx) -> list[str]:
    return [f"{type(e.event).__name__}:{e.event.n}" for e in ctx.scheduled()]


class Nap(Event):
    """Sent by ``SchedulingAgent`` for a record that naps: its action sleeps ``days``
    (twice, the second time a day more, when ``twice``)."""

    n: int
    days: int
    twice: bool = False


class SchedulingAgent(Agent):
    """Schedules events days ahead (so they fire at the end of the bounded input on every
    runner), cancels some, lists the pending ones, schedules again from a scheduled run (a
    chain, one without end), and runs an ``async def`` action for a due event. A record
    with ``nap`` sleeps instead (``ctx.sleep``), after a durable call, while the key's
    later records run: its run's sensory memory must come back with it."""

    @action(InputEvent)
    @staticmethod
    def plan(event: InputEvent, ctx) -> None:
        record = event.input
        memory = ctx.short_term_memory
        if record.get("nap"):
            ctx.sensory_memory.set("napper", {"n": record["n"]})
            twice = record.get("twice", False)
            ctx.send_event(Nap(n=record["n"], days=record["days"], twice=twice))
            return
        cancelled = None
        if record.get("cancel_last"):
            cancelled = ctx.cancel_scheduled(memory.get("last") or "none")
        # Minutes apart: no two events of a key fall due within a minute of each other,
        # whenever the runner took each record.
        days = timedelta(days=record["days"], minutes=record["n"])
        if record.get("chase"):
            handle = ctx.schedule(Chase(n=record["n"], delay_ms=record["chase"]), delay=days)
        else:
            reminder = Reminder(n=record["n"], rounds=record.get("rounds", 0))
            handle = ctx.schedule(reminder, delay=days)
        memory.set("last", handle)
        ctx.send_event(
            OutputEvent(
                output={
                    "key": ctx.key,
                    "n": record["n"],
                    "cancelled": cancelled,
                    "pending": _pending(ctx),
                }
            )
        )

    @action(Reminder)
    @staticmethod
    def remind(event: Reminder, ctx) -> None:
        memory = ctx.short_term_memory
        reminded = [*(memory.get("reminded") or []), [event.n, event.round]]
        memory.set("reminded", reminded)
        if event.rounds < 0 or event.round < event.rounds:
            again = Reminder(n=event.n, round=event.round + 1, rounds=event.rounds)
            ctx.schedule(again, delay=timedelta(days=1))
        ctx.send_event(
            OutputEvent(
                output={
                    "key": ctx.key,
                    "reminder": event.n,
                    "round": event.round,
                    "reminded": reminded,
                    "pending": _pending(ctx),
                    "sensory": to_dict(ctx.sensory_memory),
                }
            )
        )

    @action(Nap)
    @staticmethod
    async def nap(event: Nap, ctx) -> None:
        echoed = await ctx.durable_execute_async(slow_echo, event.n, 10)
        # Minutes apart, as ``plan``'s schedules are.
        await ctx.sleep(timedelta(days=event.days, minutes=event.n))
        if event.twice:
            await ctx.sleep(timedelta(days=1))
        memory = ctx.short_term_memory
        naps = [*(memory.get("naps") or []), event.n]
        memory.set("naps", naps)
        ctx.send_event(
            OutputEvent(
                output={
                    "key": ctx.key,
                    "napped": echoed,
                    "naps": naps,
                    "reminded": memory.get("reminded"),
                    "sensory": to_dict(ctx.sensory_memory),
                }
            )
        )

    @action(Chase)
    @staticmethod
    async def chase(event: Chase, ctx) -> None:
        value = await ctx.durable_execute_async(slow_echo, event.n, event.delay_ms)
        ctx.sensory_memory.set("chased", value)
        ctx.send_event(
            OutputEvent(
                output={"key": ctx.key, "chased": value, "memory": to_dict(ctx.short_term_memory)}
            )
        )
