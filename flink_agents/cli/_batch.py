"""Running a plan over a JSON-lines file (and a file of signals) with the local runner, with
an error output."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from flink_agents.cli._jsonl import Rejected, read_json_lines
from flink_agents.runtime import AgentOptions, LocalRunner, local_journal
from flink_agents.runtime.internal import (
    BadRecord,
    key_function,
    rejected,
    signal_event,
    signal_input,
    take_key,
    to_json_line,
)


@dataclass(frozen=True)
class Signals:
    """A JSON-lines file of signals for the agent's keys (``with_signals``): each record
    keyed by ``key_field`` and made into an ``event_type`` event."""

    path: Path
    key_field: str
    event_type: type


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
    options: AgentOptions | None = None,
    signals: Signals | None = None,
) -> BatchReport:
    """Run ``agent`` over every record of ``input_path``, keyed by ``key_field``, then over
    the ``signals`` if given (before the input ends: waits they do not answer time out then).

    Outputs go to ``output`` as JSON lines. Unparsable lines and records without a usable
    key go to ``errors`` as ``rejected`` records with the file, line and reason; failed runs
    under the ``error-output`` and ``retry`` policies (``options``; the default here is
    ``error-output``) go there too, as the ``failed_run`` records every runner emits (their
    ``input`` is the record). Bad input never stops the batch nor loses the good records.

    Raises:
        OSError: ``input_path`` cannot be opened or read.
        ActionExecutionError: an action failed under the ``fail`` policy.
        ActionLogError: the configured action log cannot be opened, read or written (not the
            action's fault: no run is reported as failed for it).
    """
    options = options or AgentOptions(error_policy="error-output")
    runner = LocalRunner(agent, options=options, journal=local_journal(options))
    key_of = key_function(key_field)
    report = BatchReport(runner)
    started = time.perf_counter()
    try:
        _run_lines(runner, input_path, key_of, output, errors, on_record, report, signals)
    except BaseException:
        with contextlib.suppress(Exception):  # the error above is the one to report
            runner.engine.close()
        raise
    # Async calls end, the vector store is released, and the action log's queued records
    # are written: a log that fails now still fails the run (ActionLogError).
    runner.engine.close()
    report.elapsed = time.perf_counter() - started
    return report


def _run_lines(
    runner: LocalRunner,
    input_path: Path,
    key_of: Callable[[Any], Any],
    output: TextIO,
    errors: TextIO,
    on_record: Callable[[], None] | None,
    report: BatchReport,
    signals: Signals | None = None,
) -> None:
    """Every line of ``input_path`` through ``runner``, then every signal, counted in
    ``report``."""
    inputs = [(input_path, key_of, None)]
    if signals is not None:
        inputs.append((signals.path, key_function(signals.key_field), signals.event_type))
    for path, key_of_record, event_type in inputs:
        where = str(path)
        for item in read_json_lines(path):
            if on_record is not None:
                on_record()
            report.records += 1
            if isinstance(item, Rejected):
                report.rejected += 1
                _write(errors, item.to_json())
                continue
            line, record = item
            try:
                key = take_key(key_of_record, record)
                if event_type is not None:
                    record = signal_input(signal_event(record, event_type))
            except BadRecord as error:
                report.rejected += 1
                raw = to_json_line(record)
                _write(errors, rejected(str(error), raw=raw, file=where, line=line))
                continue
            failed_before = len(runner.errors)
            outputs = runner.run(key, record)
            _report(outputs, runner.errors[failed_before:], output, errors, report)
    # The end of the input: the keys' pending scheduled events fire (docs/waiting.md).
    failed_before = len(runner.errors)
    _report(runner.finish(), runner.errors[failed_before:], output, errors, report)


def _report(
    outputs: list[Any],
    failures: list[dict[str, Any]],
    output: TextIO,
    errors: TextIO,
    report: BatchReport,
) -> None:
    """Write what runs released: failed runs to ``errors``, outputs to ``output``."""
    for failure in failures:
        report.failed_runs += 1
        _write(errors, failure)
    for produced in outputs:
        report.outputs += 1
        _write(output, produced)


def _write(stream: TextIO, value: Any) -> None:
    stream.write(to_json_line(value) + "\n")
