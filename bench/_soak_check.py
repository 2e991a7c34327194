"""The end of the soak with failures: every output exactly once, every recorded call never
run again, each key's memory counting each of its records once.

A soak leaves millions of outputs and ledger lines, too many to hold as dicts at once (an
hour at 1,000 records/s: 3.6M outputs, 7.2M ledger lines, some 4 GB of dicts). They are
split by record id into chunks on disk in one pass, and ``check_recovery``
(``flink_agents.testing.recovery``, the check of the recovery tests and ``bench.torture``)
runs on each chunk; its counts add up, since every one of them is per record id.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TextIO

from flink_agents.runtime.flink import read_json_files
from flink_agents.testing.recovery import RecoveryReport, check_recovery

CHUNK = 250_000
"""Record ids per chunk: at most a few hundred MB of dicts at a time."""

REPEATS_PER_FAILURE = 33
"""Calls a failure may interrupt between their side effect and their log write: those in
flight, at most ``max-in-flight`` async calls (its default: 2 x 16 async threads) and one
synchronous call."""


@dataclass(frozen=True)
class Outcome:
    """What the job's outputs and the ledger say, for the prefix of the input it read."""

    read: int
    """Records the job read before it was stopped: the highest output id + 1."""
    recovery: RecoveryReport
    memory_miscounted: int
    """Keys whose outputs' ``count`` fields are not exactly 1..n."""
    calls_without_output: int
    """Ledger lines for ids beyond the outputs' prefix."""
    errors: int

    @property
    def exactly_once(self) -> bool:
        return self.read > 0 and not (self.recovery.lost or self.recovery.duplicated)

    def ok(self, failures: int) -> bool:
        """Everything the soak must prove, after ``failures`` failures."""
        return (
            self.exactly_once
            and self.recovery.ok
            and self.recovery.repeated_calls <= REPEATS_PER_FAILURE * failures
            and not self.memory_miscounted
            and not self.calls_without_output
            and not self.errors
        )


def check_outputs(out: Path, ledger: Path, users: int, scratch: Path) -> Outcome:
    """Check the committed files under ``out`` (``outputs/``, ``errors/``) against the
    ``ledger``, for inputs ``make_records(n, users)``; ``scratch`` holds the chunks."""
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    counts: dict[str, list[int]] = defaultdict(list)
    top = -1
    with _Chunks(scratch, "outputs") as chunks:
        for line in _committed_lines(out / "outputs"):
            output = json.loads(line)
            counts[output["user"]].append(output["count"])
            top = max(top, output["id"])
            chunks.add(output["id"], line)
    read = top + 1
    beyond = 0
    with _Chunks(scratch, "ledger") as chunks:
        for line in _lines(ledger):
            call = json.loads(line)
            beyond += call["id"] >= read
            chunks.add(call["id"], line)
    reports = [
        check_recovery(
            ({"id": i} for i in range(start, min(start + CHUNK, read))),  # it reads only ids
            _parsed(scratch, "outputs", start // CHUNK),
            _parsed(scratch, "ledger", start // CHUNK),
        )
        for start in range(0, read, CHUNK)
    ]
    shutil.rmtree(scratch, ignore_errors=True)
    per_user = Counter(f"u{i % users}" for i in range(read))
    miscounted = sum(
        1 for user, n in per_user.items() if sorted(counts.get(user, ())) != list(range(1, n + 1))
    )
    errors = read_json_files(out / "errors") if (out / "errors").exists() else []
    return Outcome(
        read=read,
        recovery=RecoveryReport(
            *(sum(getattr(r, f.name) for r in reports) for f in fields(RecoveryReport))
        ),
        memory_miscounted=miscounted,
        calls_without_output=beyond,
        errors=len(errors),
    )


class _Chunks:
    """Lines written to ``<kind>-<id // CHUNK>.jsonl`` files."""

    def __init__(self, directory: Path, kind: str) -> None:
        self.directory, self.kind = directory, kind
        self.files: dict[int, TextIO] = {}

    def add(self, record_id: int, line: str) -> None:
        chunk = record_id // CHUNK
        file = self.files.get(chunk)
        if file is None:
            file = self.files[chunk] = (self.directory / f"{self.kind}-{chunk}.jsonl").open("w")
        file.write(line if line.endswith("\n") else line + "\n")

    def __enter__(self) -> _Chunks:
        return self

    def __exit__(self, *exc: object) -> None:
        for file in self.files.values():
            file.close()


def _parsed(directory: Path, kind: str, chunk: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _lines(directory / f"{kind}-{chunk}.jsonl")]


def _committed_lines(directory: Path) -> Iterator[str]:
    """The lines of the committed part files, as ``read_json_files`` picks them (in-progress
    and pending files are hidden: their names start with a dot)."""
    if not directory.exists():
        return
    for path in sorted(directory.rglob("*.jsonl")):
        if not path.name.startswith("."):
            yield from _lines(path)


def _lines(path: Path) -> Iterator[str]:
    if not path.exists():
        return
    with path.open() as file:
        for line in file:
            if line.strip():
                yield line
