"""Reading JSON-lines input where a bad line is reported, never fatal."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flink_agents.runtime.internal import BadRecord, parse_json_object, rejected


@dataclass(frozen=True)
class Rejected:
    """A line that could not become a record, with the reason; goes to the error output."""

    file: str
    line: int
    raw: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return rejected(self.reason, raw=self.raw, file=self.file, line=self.line)


def read_json_lines(path: Path) -> Iterator[tuple[int, Any] | Rejected]:
    """``(line number, record)`` for each JSON object line, ``Rejected`` for the others
    (a line that is not UTF-8 included: it costs that line, not the file). Blank lines are
    skipped.

    Raises:
        OSError: the file cannot be opened or read.
    """
    with path.open("rb") as lines:
        for number, raw_bytes in enumerate(lines, start=1):
            try:
                text = raw_bytes.decode("utf-8").strip()
            except UnicodeDecodeError as error:
                shown = raw_bytes.decode("utf-8", "backslashreplace").strip()
                byte = raw_bytes[error.start]
                reason = f"not UTF-8 (byte {byte:#04x} at column {error.start + 1})"
                yield Rejected(str(path), number, shown, reason)
                continue
            if not text:
                continue
            try:
                yield number, parse_json_object(text)
            except BadRecord as error:
                yield Rejected(str(path), number, text, str(error))
