"""The log stores enough to rebuild memory: replaying recorded deltas gives the same map."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from flink_agents.api import MemoryObject
from flink_agents.memory import BufferedState, DictState, FlatMemory, ObjectMarker
from flink_agents.runtime.action_log import ActionLog, ActionRecord
from tests.runtime.action_log.records import Answer, ident

Operation = Callable[[MemoryObject], Any]

SCRIPTED: list[list[Operation]] = [
    [lambda m: m.set("user.name", "ann"), lambda m: m.set("user.tags", ["a"])],
    [lambda m: m.new_object("user.prefs").set("lang", "en"), lambda m: m.set("n", 1)],
    [lambda m: m.set("answer", Answer(text="x", confidence=0.5)), lambda m: m.delete("n")],
    [lambda m: m.set("copy", m.get_object("user")), lambda m: m.delete("user.tags")],
    [lambda m: m.set("user", "flattened"), lambda m: m.set("copy.prefs.lang", "de")],
    [lambda m: m.delete("missing"), lambda m: m.new_object("copy.prefs")],
]


def random_actions(seed: int, actions: int = 30) -> list[list[Operation]]:
    """Random set / new_object / delete operations over a small tree of paths."""
    rng = random.Random(seed)
    paths = ["a", "b", "a.x", "a.y", "b.z", "a.x.deep", "c"]

    def operation() -> Operation:
        path, value = rng.choice(paths), rng.choice([1, "s", [1, 2], {"k": None}, None])
        kind = rng.choice(["set", "set", "new", "delete"])

        def apply(memory: MemoryObject) -> None:
            try:
                if kind == "set":
                    memory.set(path, value)
                elif kind == "new":
                    memory.new_object(path)
                else:
                    memory.delete(path)
            except ValueError:  # writing under a plain value: the action sees the error
                pass

        return apply

    return [[operation() for _ in range(rng.randint(1, 4))] for _ in range(actions)]


def run_and_record(
    log: ActionLog, actions: list[list[Operation]], clear_at: int, job: str = "job-1"
) -> tuple[DictState, DictState]:
    """Run each action through BufferedState overlays as the engine does, logging its deltas.

    The operations go to short-term memory; sensory memory gets one field per step and is
    cleared at step ``clear_at``, as at the end of a run.
    """
    sensory, short_term = DictState(), DictState()
    for step, operations in enumerate(actions, start=1):
        buffers = BufferedState(sensory), BufferedState(short_term)
        if step == clear_at:
            buffers[0].clear()
        FlatMemory(buffers[0]).root().set(f"seen.s{step}", step)
        for operation in operations:
            operation(FlatMemory(buffers[1]).root())
        deltas = buffers[0].delta(), buffers[1].delta()
        deltas[0].apply_to(sensory)
        deltas[1].apply_to(short_term)
        log.complete(ActionRecord(ident(job, step=step), *deltas, events=(), calls=(), epoch=1))
    return sensory, short_term


def replay(log: ActionLog, steps: int, job: str = "job-1") -> tuple[DictState, DictState]:
    sensory, short_term = DictState(), DictState()
    for step in range(1, steps + 1):
        record = log.completed(ident(job, step=step))
        assert record is not None
        record.sensory.apply_to(sensory)
        record.short_term.apply_to(short_term)
    return sensory, short_term


def test_replayed_deltas_rebuild_the_scripted_map(log: ActionLog) -> None:
    """Replaying the recorded deltas in order rebuilds the exact flattened maps."""
    sensory, short_term = run_and_record(log, SCRIPTED, clear_at=4)
    rebuilt_sensory, rebuilt_short = replay(log, len(SCRIPTED))
    assert rebuilt_sensory.data == sensory.data and rebuilt_short.data == short_term.data
    assert rebuilt_short.data[""] == ObjectMarker(("user", "answer", "copy"))
    assert rebuilt_short.data["copy.prefs"] == ObjectMarker()
    assert rebuilt_short.data["user"] == "flattened"
    assert rebuilt_sensory.data["seen"] == ObjectMarker(("s4", "s5", "s6"))


def test_replayed_deltas_rebuild_random_maps(log: ActionLog) -> None:
    """Random operation sequences, replayed from the log, give identical maps."""
    for seed in range(3):
        actions = random_actions(seed)
        job = f"job-{seed}"
        sensory, short_term = run_and_record(log, actions, clear_at=seed + 5, job=job)
        rebuilt_sensory, rebuilt_short = replay(log, len(actions), job)
        assert rebuilt_sensory.data == sensory.data
        assert rebuilt_short.data == short_term.data
