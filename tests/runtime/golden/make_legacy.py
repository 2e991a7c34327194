"""Writes the golden fixtures of Flink state as release 0.1.0 (main d2e56d1) wrote it.

Run once, with that release's code, from a checkout of it holding this directory:
``python -m tests.runtime.golden.make_legacy OUT_DIR``. Never run again: the fixtures are what that
release wrote, and the current code must keep reading them.
"""

from __future__ import annotations

import pickle
import sys
from collections import deque
from pathlib import Path

from flink_agents.memory import MemoryDelta, ObjectMarker
from flink_agents.runtime._driver import KeyControl
from flink_agents.runtime._engine import PendingAction, RunState
from tests.runtime.golden.values import KEY, NOTE, RUN_INPUT, SENT, run_input_event


def values() -> dict[str, object]:
    at_input = RunState(KEY, 3, RUN_INPUT, parked=True)
    event = run_input_event()
    at_input.queue = deque([PendingAction("first", event), PendingAction("second", event)])
    mid_queue = RunState(
        KEY,
        4,
        RUN_INPUT,
        steps=2,
        attempts=1,
        retry_at_ms=1_700_000_000_123,
        sensory_written=True,
        parked=True,
    )
    mid_queue.queue = deque([PendingAction("third", NOTE), PendingAction("fourth", NOTE)])
    fan_out = RunState(KEY, 5, RUN_INPUT, steps=1, attempts=2, parked=True)
    fan_out.queue = deque([PendingAction("left", event), PendingAction("right", event)])
    fan_out.settled = {
        0: (
            MemoryDelta(False, {"a": 1}, ()),
            MemoryDelta(True, {"b.c": [1, 2]}, ("d",)),
            (SENT,),
            False,
        )
    }
    return {
        "control-0.1.0-idle": 7,
        "control-0.1.0-parked-at-input": (3, at_input, 2),
        "control-0.1.0-mid-queue": (4, mid_queue, 0),
        "control-0.1.0-fan-out": (5, fan_out, 1),
        "control-0.1.0-dataclass": KeyControl(2, None, 0),
        "memory-0.1.0-marker": ObjectMarker(("name", "address")),
    }


if __name__ == "__main__":
    out = Path(sys.argv[1])
    for name, value in values().items():
        (out / f"{name}.pickle").write_bytes(pickle.dumps(value, protocol=pickle.DEFAULT_PROTOCOL))
