"""An agent whose durable calls leave a trace outside the job, and the checks made on it.

Recovery tests and ``bench/torture`` run ``LedgerAgent`` through real failures. Every
execution of its durable calls appends a line to a *ledger* file, outside Flink and outside
the action log, and returns a fresh execution id that ends up in the job's output. After
the job, ``check_recovery`` compares inputs, outputs and ledger:

- every input has exactly one output (the sink is exactly-once);
- the execution id in each output is the **last** execution of that call in the ledger: a
  call executed again after its result was recorded would appear after it. Executions
  before it are calls interrupted before their result reached the log (a crash between the
  call's side effect and the log write) and are counted as ``repeated_calls``.

The agent's short-term memory depends only on the inputs, so a run with failures must end
with the same memory as ``expected_memory`` computes.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flink_agents.api import Agent, Event, InputEvent, OutputEvent, RunnerContext, action


class InjectedFailure(RuntimeError):
    """Raised once, on purpose, to make the job fail and restart from its checkpoint."""


class Charged(Event):
    """The first action's result, handed to the second."""

    record_id: int
    user: str
    charge: str


def ledger_call(ledger: str, record_id: int, step: str, delay_s: float) -> str:
    """The stand-in for a paid call (an LLM, a payment): a side effect, then a result."""
    if delay_s:
        time.sleep(delay_s)
    execution = uuid.uuid4().hex
    line = json.dumps({"id": record_id, "step": step, "exec": execution}) + "\n"
    descriptor = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line.encode())  # one small O_APPEND write: never interleaved
    finally:
        os.close(descriptor)
    return execution


def _maybe_fail(config: Mapping[str, Any]) -> None:
    """Fail once for each threshold in ``fail_after_calls``: the first time the ledger holds
    at least that many executions (a marker file per threshold remembers it across the
    restart). Counting executions, not record ids, makes every failure happen whatever the
    interleaving of keys: a record id may be done before an earlier failure, and then be
    replayed from the log, never reaching here again.

    Fail once, too, each time the file ``fail_marker`` names appears (a soak creates it when
    a failure is due): the call that removes it fails, so exactly one does, whatever the
    number of threads or workers. It costs an ``unlink`` per call, where ``fail_after_calls``
    reads the whole ledger: the one to use for a long run."""
    marker = config.get("fail_marker")
    if marker:
        try:
            os.remove(marker)
        except FileNotFoundError:
            pass
        else:
            raise InjectedFailure(f"injected failure: {marker} appeared")
    thresholds = config.get("fail_after_calls", ())
    if not thresholds:
        return
    ledger = Path(config["ledger"])
    executed = len(read_ledger(ledger))
    for threshold in thresholds:
        if executed < threshold:
            continue
        marker = ledger.with_name(f"failed-after-{threshold}")
        try:
            marker.touch(exist_ok=False)
        except FileExistsError:
            continue
        raise InjectedFailure(f"injected failure after {executed} paid calls")


class LedgerAgent(Agent):
    """Two actions per record, each with a durable call; memory written with set,
    new_object and delete. Config: ``ledger`` (file path), ``delay_s`` (latency of the
    first call), ``fail_after_calls`` (ledger sizes at which the first action fails once,
    after its call), ``fail_marker`` (a file whose appearance makes it fail once, after its
    call)."""

    @action(InputEvent)
    async def charge(event: InputEvent, ctx: RunnerContext) -> None:
        record, config = event.input, ctx.config
        charge = await ctx.durable_execute_async(
            ledger_call, config["ledger"], record["id"], "charge", config.get("delay_s", 0.0)
        )
        _maybe_fail(config)  # after the call: its re-execution must reuse it
        memory = ctx.short_term_memory
        count = (memory.get("count") or 0) + 1
        memory.set("count", count)
        memory.set("total", (memory.get("total") or 0) + record["amount"])
        last = memory.new_object("last")  # replaces the previous object and its fields
        last.set("id", record["id"])
        last.set("amount", record["amount"])
        if count % 3 == 0:
            memory.delete("streak")
        else:
            memory.set("streak.length", (memory.get("streak.length") or 0) + 1)
        ctx.sensory_memory.set("charge", charge)
        ctx.send_event(Charged(record_id=record["id"], user=record["user"], charge=charge))

    @action(Charged)
    def notify(event: Charged, ctx: RunnerContext) -> None:
        ledger = ctx.config["ledger"]
        notify = ctx.durable_execute(ledger_call, ledger, event.record_id, "notify", 0)
        seen = ctx.sensory_memory.get("charge")
        ctx.send_event(
            OutputEvent(
                output={
                    "id": event.record_id,
                    "user": event.user,
                    "charge": event.charge,
                    "notify": notify,
                    "sensory_ok": seen == event.charge,
                    "count": ctx.short_term_memory.get("count"),
                }
            )
        )


def make_records(count: int, users: int) -> list[dict[str, Any]]:
    """``count`` records over ``users`` keys, with amounts that make totals checkable."""
    return [{"id": i, "user": f"u{i % users}", "amount": i % 7 + 1} for i in range(count)]


def expected_memory(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each user's final short-term memory after ``records``, computed without the agent."""
    memory: dict[str, dict[str, Any]] = {}
    for record in records:
        state = memory.setdefault(record["user"], {})
        state["count"] = state.get("count", 0) + 1
        state["total"] = state.get("total", 0) + record["amount"]
        state["last"] = {"id": record["id"], "amount": record["amount"]}
        if state["count"] % 3 == 0:
            state.pop("streak", None)
        else:
            streak = state.setdefault("streak", {"length": 0})
            streak["length"] += 1
    return memory


@dataclass(frozen=True)
class RecoveryReport:
    """What a run with failures did to outputs and paid calls."""

    inputs: int
    outputs: int
    lost: int
    duplicated: int
    repeated_calls: int
    """Executions of a call before the one whose result was used: calls interrupted before
    their result reached the action log."""
    reexecuted_after_record: int
    """Calls executed again after their result was recorded: must be 0."""
    sensory_mismatches: int

    @property
    def ok(self) -> bool:
        return not (
            self.lost or self.duplicated or self.reexecuted_after_record or self.sensory_mismatches
        )


def read_ledger(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def check_recovery(
    records: Iterable[Mapping[str, Any]],
    outputs: Iterable[Mapping[str, Any]],
    ledger: Iterable[Mapping[str, Any]],
) -> RecoveryReport:
    """Compare a run's outputs and ledger with its inputs (see the module docstring)."""
    ids = [record["id"] for record in records]
    outputs = list(outputs)
    seen = Counter(output["id"] for output in outputs)
    executions: dict[tuple[int, str], list[str]] = defaultdict(list)
    for line in ledger:
        executions[(line["id"], line["step"])].append(line["exec"])
    repeated = after_record = 0
    for output in outputs:
        for step in ("charge", "notify"):
            done = executions.get((output["id"], step), [])
            if output[step] not in done:
                after_record += 1  # an output whose call left no trace: cannot happen
                continue
            position = done.index(output[step])
            repeated += position
            after_record += len(done) - position - 1
    return RecoveryReport(
        inputs=len(ids),
        outputs=len(outputs),
        lost=sum(1 for i in ids if seen[i] == 0),
        duplicated=sum(n - 1 for n in seen.values() if n > 1),
        repeated_calls=repeated,
        reexecuted_after_record=after_record,
        sensory_mismatches=sum(1 for output in outputs if not output["sensory_ok"]),
    )
