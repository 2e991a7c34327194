"""The agent and raw function ``bench/scale.py`` ships to Flink for memory of many fields.

A key's short-term memory is a tree of objects of ten fields each under ``profile``: 10 fields
are ``profile.f0`` .. ``profile.f9``, 100 are ``profile.a0.f0`` .. ``profile.a9.f9``, 1,000 are
``profile.a0.b0.f0`` .. and so on; every fifth leaf holds a list, the others an int. A key's
first record fills the tree; every later record reads one leaf and writes another (both
chosen by the record's number) and updates a counter: the few-fields run seed 000 promises
costs the same whatever the memory's size. ``RawFields`` does the same reads and writes on a
``MapState`` holding the same leaves under the same paths (a user's own flattening, with no
object markers), filled with one ``put_all``.
"""

from __future__ import annotations

import time
from typing import Any

from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction, MapFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor

from flink_agents.api import Agent, InputEvent, OutputEvent, action

FAN_OUT = 10
"""Fields per object of the tree."""

RECORD_TYPE = Types.TUPLE([Types.STRING(), Types.LONG(), Types.INT()])


class ToFieldsRecord:
    """Sequence number ``n`` -> ``(key, n, fields)`` over ``num_keys`` keys."""

    def __init__(self, num_keys: int, fields: int) -> None:
        self.num_keys, self.fields = num_keys, fields

    def __call__(self, n: int) -> tuple[str, int, int]:
        return f"k{n % self.num_keys}", n, self.fields


def leaf_paths(fields: int) -> list[str]:
    """The paths of a tree of ``fields`` leaves (a power of ``FAN_OUT``), ten per object."""
    depth, size = 1, FAN_OUT
    while size < fields:
        depth, size = depth + 1, size * FAN_OUT
    if size != fields:
        raise ValueError(f"fields must be a power of {FAN_OUT}, not {fields}")
    levels = [chr(ord("a") + level) for level in range(depth - 1)] + ["f"]
    paths = []
    for i in range(fields):
        digits = f"{i:0{depth}d}"
        paths.append(
            "profile." + ".".join(f"{lv}{d}" for lv, d in zip(levels, digits, strict=True))
        )
    return paths


def leaf_value(i: int) -> Any:
    return [i, i + 1, i + 2] if i % 5 == 0 else i


_PATHS: dict[int, list[str]] = {}


def paths_of(fields: int) -> list[str]:
    """``leaf_paths``, made once per size in each Python worker."""
    paths = _PATHS.get(fields)
    if paths is None:
        paths = _PATHS[fields] = leaf_paths(fields)
    return paths


class FieldsAgent(Agent):
    """One action: fill the tree on a key's first record; then read a leaf, write a leaf,
    count."""

    @action(InputEvent)
    @staticmethod
    def touch(event: InputEvent, ctx: Any) -> None:
        memory = ctx.short_term_memory
        _, n, fields = event.input
        paths = paths_of(fields)
        count = memory.get("count")
        if count is None:
            for i, path in enumerate(paths):
                memory.set(path, leaf_value(i))
            count = 0
        read = memory.get(paths[n % fields])
        memory.set(paths[(n + 1) % fields], n)
        memory.set("count", count + 1)
        ctx.send_event(OutputEvent(output=(ctx.key, count + 1, read is not None)))


class RawFields(KeyedProcessFunction):
    """The same reads and writes on a ``MapState[str, pickled]`` of the same leaves."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.memory = runtime_context.get_map_state(
            MapStateDescriptor("short_term", Types.STRING(), Types.PICKLED_BYTE_ARRAY())
        )

    def process_element(self, value: tuple[str, int, int], ctx: KeyedProcessFunction.Context):
        memory = self.memory
        _, n, fields = value
        paths = paths_of(fields)
        count = memory.get("count")
        if count is None:
            memory.put_all({path: leaf_value(i) for i, path in enumerate(paths)})
            count = 0
        read = memory.get(paths[n % fields])
        memory.put(paths[(n + 1) % fields], n)
        memory.put("count", count + 1)
        yield ctx.get_current_key(), count + 1, read is not None


# -- checkpoints and restore (bench/scale_checkpoints.py) ------------------------------------


def parse_record(line: str) -> tuple[str, int]:
    """An input line ``k<i>,<n>`` -> the benchmark record ``(key, n)``."""
    key, n = line.split(",")
    return key, int(n)


class ParseFieldsRecord:
    """An input line ``k<i>,<n>`` -> ``(key, n, fields)``: ``FieldsAgent``'s and
    ``RawFields``' record, for keys whose memory holds ``fields`` leaves."""

    def __init__(self, fields: int) -> None:
        self.fields = fields

    def __call__(self, line: str) -> tuple[str, int, int]:
        key, n = parse_record(line)
        return key, n, self.fields


class Progress(MapFunction):
    """Counts the records that pass and appends ``<count> <time.time()>`` to a file every
    ``every`` records: the benchmark's view of a running job's progress (thread mode runs
    this inside the JVM, so a file is the way out). Passes records through unchanged."""

    def __init__(self, path: str, every: int) -> None:
        self.path, self.every, self.count = path, every, 0

    def map(self, value: Any) -> Any:
        self.count += 1
        if self.count % self.every == 0:
            with open(self.path, "a", encoding="ascii") as out:
                out.write(f"{self.count} {time.time()}\n")
        return value
