"""Running a plan over a JSON-lines file with the local runner, with an error output."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from flink_agents.api import ActionExecutionError, FlinkAgentsError
from flink_agents.cli._jsonl import Rejected, read_json_lines
from flink_agents.runtime import LocalRunner
from flink_agents.runtime._keys import key_function
from flink_agents.runtime._records import to_json_line


@dataclass
class BatchReport:
    """What a batch run did, for the summary."""

    runner: LocalRunner
    records: int = 0
    rejected: int = 0
    failed_runs: int = 0
    outputs: int = 0
    elapsed: float = 0.0
    output_path: Path | None = None
    error_path: Path | None = None


def run_json_lines(
    agent: Any,
    input_path: Path,
    key_field: str,
    output: TextIO,
    errors: TextIO,
    on_record: Callable[[], None] | None = None,
) -> BatchReport:
    """Run ``agent`` over every record of ``input_path``, keyed by ``key_field``.

    Outputs go to ``output`` as JSON lines. Unparsable lines, records without a key and
    failed runs go to ``errors`` (one JSON object each, with the reason) and processing
    goes on: bad input never stops the batch nor loses the good records.
    """
    runner = LocalRunner(agent)
    key_of = key_function(key_field)
    report = BatchReport(runner)
    started = time.perf_counter()
    for item in read_json_lines(input_path):
        if on_record is not None:
            on_record()
        report.records += 1
        if isinstance(item, Rejected):
            report.rejected += 1
            _write(errors, item.to_json())
            continue
        line, record = item
        try:
            key = key_of(record)
        except FlinkAgentsError as error:
            report.rejected += 1
            _write(errors, {"kind": "rejected", "line": line, "raw": record, "reason": str(error)})
            continue
        try:
            outputs = runner.run(key, record)
        except ActionExecutionError as error:
            report.failed_runs += 1
            _write(
                errors,
                {
                    "kind": "failed_run",
                    "line": line,
                    "key": key,
                    "action": error.action,
                    "input": record,
                    "error": f"{type(error.cause).__name__}: {error.cause}",
                },
            )
            continue
        for produced in outputs:
            report.outputs += 1
            _write(output, produced)
    report.elapsed = time.perf_counter() - started
    return report


def _write(stream: TextIO, value: Any) -> None:
    stream.write(to_json_line(value) + "\n")
