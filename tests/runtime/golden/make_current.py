"""Writes the golden fixtures of Flink state in the format this release writes.

``python -m tests.runtime.golden.make_current OUT_DIR RELEASE`` writes ``control-RELEASE-*.pickle``
and ``memory-RELEASE-marker.pickle`` from the values ``make_legacy`` wrote for 0.1.0. Run
once per release whose format changed, never over existing files: each fixture is what its
release wrote, and later code must keep reading it.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from typing import Any

from flink_agents.memory import ObjectMarker
from flink_agents.runtime._driver import KeyControl
from flink_agents.runtime._persisted import encode_control
from tests.runtime.golden.make_legacy import values


def stored_values() -> dict[str, Any]:
    """What this release stores for each 0.1.0 fixture's value, by the 0.1.0 fixture's name."""
    stored: dict[str, Any] = {}
    for name, value in values().items():
        if name == "control-0.1.0-idle":
            stored[name] = encode_control(KeyControl(value))
        elif name.startswith("control-0.1.0-") and type(value) is tuple:
            stored[name] = encode_control(KeyControl(*value))
        elif name == "memory-0.1.0-marker":
            stored[name] = ObjectMarker(value.fields)
    return stored


def main(out: Path, release: str) -> None:
    for name, value in stored_values().items():
        target = out / f"{name.replace('-0.1.0-', f'-{release}-')}.pickle"
        if target.exists():
            raise SystemExit(f"{target} exists: a fixture is never regenerated")
        target.write_bytes(pickle.dumps(value, protocol=pickle.DEFAULT_PROTOCOL))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
