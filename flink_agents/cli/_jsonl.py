"""Reading JSON-lines input where a bad line is reported, never fatal."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flink_agents.runtime._records import BadRecord, parse_json_object


@dataclass(frozen=True)
class Rejected:
    """A line that could not become a record, with the reason; goes to the error output."""

    line: int
    raw: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": "rejected", "line": self.line, "raw": self.raw, "reason": self.reason}


def read_json_lines(path: Path) -> Iterator[tuple[int, Any] | Rejected]:
    """``(line number, record)`` for each JSON object line, ``Rejected`` for the others.
    Blank lines are skipped."""
    with path.open(encoding="utf-8") as lines:
        for number, raw in enumerate(lines, start=1):
            text = raw.strip()
            if not text:
                continue
            try:
                yield number, parse_json_object(text)
            except BadRecord as error:
                yield Rejected(number, text, str(error))
