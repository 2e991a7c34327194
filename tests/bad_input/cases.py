"""The catalogue of bad actions and bad memory use, shared by the local and MiniCluster tests.

Each case is a record for ``CatalogueAgent`` and what its run must end with: the failing
action and the error (``"Type: message"``), or None when the run must succeed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ONLY_DURABLE = (
    "FlinkAgentsError: an async action may only await ctx.durable_execute_async(...): runners "
    "park the run between awaits and have no asyncio event loop"
)
ALLOWED = (
    "memory values must be None, bool, int, float, str, bytes, lists and str-keyed dicts of "
    "those, or objects that pickle (pydantic models, tuples, sets, module-level classes)"
)
UNPICKLABLE = "MemoryValueError: cannot store %s at 'slot': it does not pickle; "
MAX_STEPS = 50
BIG = 20 * 1024 * 1024  # bytes in one memory value


@dataclass(frozen=True)
class Case:
    fields: dict[str, Any]
    action: str | None = None
    """The action that fails (None: the run succeeds)."""
    error: str | None = None


ACTIONS: dict[str, Case] = {
    "raises": Case({"case": "raise"}, "handle", "ValueError: record {n} is bad"),
    "awaits asyncio.sleep": Case(
        {"case": "sleep"}, "wait", f"{ONLY_DURABLE} (asyncio said: no running event loop)"
    ),
    "awaits an asyncio future": Case(
        {"case": "asyncio_future"}, "wait", f"{ONLY_DURABLE}, it awaited <Future pending>"
    ),
    "sends events in a loop": Case(
        {"case": "loop"},
        "again",
        f"FlinkAgentsError: the run exceeded {MAX_STEPS} steps; is an action sending events in "
        "a loop? (raise max_steps if this is intended)",
    ),
    "sends a dict": Case(
        {"case": "send_dict"}, "handle", "TypeError: send_event takes an Event, got dict"
    ),
    "sends an InputEvent": Case(
        {"case": "send_input"},
        "handle",
        "FlinkAgentsError: actions cannot send an InputEvent: the framework creates it",
    ),
}


def _path(path: Any, error: str | None) -> Case:
    return Case({"case": "path", "path": path}, "handle" if error else None, error)


def _value(kind: str, error: str) -> Case:
    return Case({"case": "unstorable", "kind": kind}, "handle", error)


MEMORY: dict[str, Case] = {
    "empty path": _path("", "MemoryPathError: invalid memory path '': empty path segment"),
    "two dots": _path("a..b", "MemoryPathError: invalid memory path 'a..b': empty path segment"),
    "leading dot": _path(".a", "MemoryPathError: invalid memory path '.a': empty path segment"),
    "trailing dot": _path("a.", "MemoryPathError: invalid memory path 'a.': empty path segment"),
    "None as a path": _path(None, "MemoryPathError: memory path must be a str, got NoneType: None"),
    "int as a path": _path(1, "MemoryPathError: memory path must be a str, got int: 1"),
    "list as a path": _path(["a"], "MemoryPathError: memory path must be a str, got list: ['a']"),
    "dotted path": _path("a.b", None),
    "a lambda": _value("lambda", f"{UNPICKLABLE % 'function'}{ALLOWED}"),
    "a socket": _value("socket", f"{UNPICKLABLE % 'socket'}{ALLOWED}"),
    "a dict with int keys": _value(
        "int_keys",
        "MemoryValueError: cannot store a dict with key 1 (int) at 'slot': dict keys in memory "
        "must be str",
    ),
    "a list containing itself": _value(
        "self_containing",
        "MemoryValueError: cannot store the value at 'slot': it contains itself or is nested too "
        "deeply",
    ),
    "20 MB of bytes": Case({"case": "big_write", "size": BIG}),
    "reading the 20 MB back": Case({"case": "big_read"}),
}

# Values that validate as pydantic models but cannot be serialized: refused at ``set``, in
# the action, with a MemoryValueError naming the path and the type, by both runners
# (test_memory.py checks the local runner and MiniCluster). The error text is checked
# loosely: it quotes the serializer's own message.
UNSERIALIZABLE_MODELS: dict[str, tuple[Case, tuple[str, ...]]] = {
    "a pydantic model holding a lambda": (
        _value("model_with_lambda", "MemoryValueError"),
        ("HoldsACallable", "function"),
    ),
    "a pydantic model holding a socket": (
        _value("model_with_socket", "MemoryValueError"),
        ("HoldsASocket", "socket"),
    ),
}


def interleaved(cases: dict[str, Case], key: str = "u", start: int = 0) -> list[dict[str, Any]]:
    """Each case's record (``label``: the case's name) followed by a good record of the same
    key; ``n`` numbers them from ``start``."""
    records = []
    for i, (label, case) in enumerate(cases.items()):
        n = start + 2 * i
        records.append({"user": key, "n": n, "label": label, **case.fields})
        records.append({"user": key, "n": n + 1})
    return records


def expected_seen(records: list[dict[str, Any]], cases: dict[str, Case]) -> dict[int, list[int]]:
    """For each record whose run succeeds, the ``seen`` list of its output: the ``n`` of every
    earlier successful run of its key, and its own."""
    seen: dict[str, list[int]] = {}
    result = {}
    for record in records:
        label = record.get("label")
        if label is not None and cases[label].error is not None:
            continue
        seen.setdefault(record["user"], []).append(record["n"])
        result[record["n"]] = list(seen[record["user"]])
    return result
