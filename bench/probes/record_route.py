"""Probe: the route one record takes through our modules (issue 40: "the static route of one
record enters each module once").

Runs the benchmark's memory agent (``bench.agents.CounterAgent``, two plain actions) in the
local runner, warms it up with a few records of one key, then traces one more record with
``sys.setprofile`` and prints the calls that cross from one of our modules into another, as
a tree (what the user's action calls is not followed). It then counts the calls that enter a
module the route had already left (a module still on the stack, called back, counts too):
the ping-pong the run core's seams are meant to avoid. The runner's own adapters (its
``KeyState`` and timers, called by the driver by design) are listed apart.

    PYTHONPATH=$PWD .venv/bin/python bench/probes/record_route.py [--log] [--async]

``--log`` runs with the default action log (SQLite under a temporary directory); ``--async``
runs ``bench.agents.SleepyAgent`` instead, whose one ``async def`` action awaits a durable
call (of no duration): its run parks and resumes (only the runner's thread is traced).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from types import FrameType
from typing import Any

OURS = ("flink_agents", "bench")
USER = "bench.agents"
ADAPTERS = ("flink_agents.runtime._local", "flink_agents.runtime._input_order")
"""The runner: it calls the driver, and the driver calls its ``KeyState`` and timers back."""


def trace_one_record(log: bool, sleepy: bool) -> list[tuple[int, str, str, str | None]]:
    """(depth, module, function, calling module) for each call across our modules."""
    os.environ.setdefault("FLINK_AGENTS_DATA_DIR", tempfile.mkdtemp(prefix="route-"))
    from bench.agents import CounterAgent, SleepyAgent
    from flink_agents.plan import to_plan
    from flink_agents.runtime import AgentOptions, LocalRunner, local_journal

    journal = local_journal(AgentOptions()) if log else None
    agent = CounterAgent
    if sleepy:
        agent = to_plan(SleepyAgent).model_copy(update={"config": {"seconds": 0.0}})
    runner = LocalRunner(agent, journal=journal)
    for n in range(5):
        runner.run("k0", ("k0", n))
    stack: list[str] = []
    calls: list[tuple[int, str, str, str | None]] = []

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "return":
            if stack:
                stack.pop()
            return
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        ours = [m for m in stack if m.startswith(OURS)]
        stack.append(module)
        if USER in ours or not module.startswith(OURS):
            return
        caller = ours[-1] if ours else None
        if module != caller:
            depth = sum(1 for a, b in zip([None, *ours], ours, strict=False) if a != b)
            calls.append((depth, module, frame.f_code.co_name, caller))

    sys.setprofile(profile)
    try:
        runner.run("k0", ("k0", 99))
    finally:
        sys.setprofile(None)
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", action="store_true", help="with the default action log")
    parser.add_argument("--async", dest="sleepy", action="store_true", help="an async action")
    args = parser.parse_args()
    calls = trace_one_record(args.log, args.sleepy)
    callers: dict[str, set[str]] = {}
    for depth, module, function, caller in calls:
        short = module.replace("flink_agents.", "")
        print("  " * depth + f"{short}.{function}")
        if caller is not None and USER not in (caller, module):
            callers.setdefault(module, set()).add(caller)
    # The route as code: one edge per (calling module, called module), whatever the loops.
    print("\nmodules entered from more than one module, or from one they called:")
    found = False
    for module, froms in callers.items():
        back = {c for c in froms if _calls(callers, module, c)}
        if len(froms) > 1 or back:
            found = True
            names = ", ".join(sorted(c.replace("flink_agents.", "") for c in froms))
            print(
                f"  {module.replace('flink_agents.', '')} <- {names}"
                + ("  (a call back)" if back else "")
            )
    if not found:
        print("  none")


def _calls(callers: dict[str, set[str]], module: str, target: str) -> bool:
    """Whether ``module`` reaches ``target`` through the calls seen (``target`` called
    ``module`` back)."""
    seen, todo = set(), [target]
    while todo:
        current = todo.pop()
        for caller in callers.get(current, ()):
            if caller == module:
                return True
            if caller not in seen:
                seen.add(caller)
                todo.append(caller)
    return False


if __name__ == "__main__":
    main()
