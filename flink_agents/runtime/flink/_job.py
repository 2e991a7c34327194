"""The main job: JSON lines from files (and signals from more files), an agent per key,
JSON lines into files.

Used by ``jobs/agent_job.py`` (``flink run -py``) and by the demo in MiniCluster. Bad lines
and records without a key go to the error files with the reason; so do failed runs under
the ``error-output`` policy. The file sinks commit on checkpoints, so every output appears
exactly once even when the job restarts.
"""

from __future__ import annotations

import errno
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyflink.common import Encoder, Types, WatermarkStrategy
from pyflink.datastream import (
    DataStream,
    KeyedProcessFunction,
    RuntimeContext,
    StreamExecutionEnvironment,
)
from pyflink.datastream.connectors.file_system import (
    BucketAssigner,
    FileSink,
    FileSource,
    OutputFileConfig,
    StreamFormat,
)
from pyflink.datastream.state import ValueStateDescriptor

from flink_agents._shipping import ShippedByName, ShippedFunction
from flink_agents.api import ForgetKey
from flink_agents.plan import AgentPlan
from flink_agents.runtime._keys import ConstantKey, key_function
from flink_agents.runtime._records import (
    BadRecord,
    RejectedRecord,
    parse_json_object,
    rejected,
    take_key,
    to_json_line,
)
from flink_agents.runtime.flink._environment import FlinkExecutionEnvironment

REPLACEMENT = "\ufffd"
NOT_UTF8 = "not UTF-8 (Flink decoded a byte sequence that is not UTF-8 as U+FFFD)"


@dataclass(frozen=True)
class JobPaths:
    """Where the job reads and writes; each output directory gets ``*.jsonl`` part files."""

    input: Path
    output: Path
    errors: Path
    memory: Path | None = None
    signals: Path | None = None
    """Signals for the agent's keys (``with_signals``): a JSON-lines file or folder."""
    forget: Path | None = None
    """Erasure requests (``ForgetKey``): a JSON-lines file or folder of ``{"key": K,
    "request_id": ...}`` lines, taken with the input."""


class ParseJsonLines(ShippedByName, KeyedProcessFunction):
    """A line of one input file (the stream is keyed by the file) to a dict record; a bad
    line or a record without a usable key becomes a ``RejectedRecord`` with its file, line
    number and reason, which the agent's key-taking step passes to the error output.

    Flink's text format decodes UTF-8 leniently, replacing what is not UTF-8 by U+FFFD: a
    line holding U+FFFD is rejected as not UTF-8 rather than run with altered text (a file
    that means U+FFFD must escape it as ``\\ufffd`` in its JSON).

    The line number is keyed state, so it is checkpointed together with the file source's
    position and stays right after a restore. The file's lines arrive in order: a text file
    is one split, read by one source subtask.
    """

    def __init__(self, key_field: str) -> None:
        self.key_field = key_field

    def open(self, runtime_context: RuntimeContext) -> None:
        self._key_of = key_function(self.key_field)
        self._lines = runtime_context.get_state(ValueStateDescriptor("line", Types.LONG()))

    def process_element(self, line: str, ctx: KeyedProcessFunction.Context) -> Any:
        number = (self._lines.value() or 0) + 1
        self._lines.update(number)
        text = line.strip()
        if not text:
            return
        try:
            if REPLACEMENT in text:
                raise BadRecord(NOT_UTF8)
            record = parse_json_object(text)
            take_key(self._key_of, record)
        except BadRecord as error:
            file = ctx.get_current_key()
            yield RejectedRecord(rejected(str(error), raw=text, file=file, line=number))
            return
        yield record


def input_files(path: Path) -> list[Path]:
    """The files the job reads: ``path`` itself, or the files under a directory (hidden ones
    left out), in name order.

    Raises:
        FileNotFoundError: ``path`` does not exist (checked here, before the job starts,
            rather than by a failing and restarting source).
    """
    if not path.exists():
        raise FileNotFoundError(errno.ENOENT, "no such input file or directory", str(path))
    if path.is_dir():
        return sorted(
            p
            for p in path.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
    return [path]


def build_agent_job(
    env: StreamExecutionEnvironment,
    plan: AgentPlan,
    paths: JobPaths,
    key_field: str,
    checkpoint_interval_ms: int = 2000,
    *,
    signal_key: str | None = None,
    signal_type: type | None = None,
    **options: Any,
) -> None:
    """Add the sources, the agent and the sinks to ``env``; call ``env.execute`` after.
    With ``paths.signals``, its records are the agent's signals (``with_signals``), keyed by
    ``signal_key`` (default: ``key_field``), each made into a ``signal_type`` event."""
    files = input_files(paths.input)
    if not files:
        raise FileNotFoundError(f"no input files under {paths.input}")
    signal_files = [] if paths.signals is None else input_files(paths.signals)
    if paths.signals is not None and signal_type is None:
        raise ValueError("signals need signal_type: the Event class each record makes")
    # First, before any operator exists: PyFlink fixes a Python operator's execution mode
    # when the operator is created, and this is where the job's default mode (thread) is set.
    agents = FlinkExecutionEnvironment(env, **options)
    env.enable_checkpointing(checkpoint_interval_ms)
    records = _json_lines(env, files, key_field, "")
    if paths.forget is not None:
        requests = _json_lines(env, input_files(paths.forget), "key", "forget-").map(
            ShippedFunction(_forget_request), output_type=Types.PICKLED_BYTE_ARRAY()
        )
        records = records.union(requests.name("forget-requests").uid("forget-requests"))
    builder = agents.from_datastream(records, key_field)
    if signal_files:
        signal_key = signal_key or key_field
        signals = _json_lines(env, signal_files, signal_key, "signals-")
        builder = builder.with_signals(signals, signal_key, event_type=signal_type)
    builder = builder.apply(plan)
    _to_files(builder.to_datastream(), paths.output, "outputs")
    _to_files(builder.error_stream(), paths.errors, "errors")
    if paths.memory is not None:
        _to_files(builder.memory_stream(), paths.memory, "memory")


def _json_lines(
    env: StreamExecutionEnvironment, files: list[Path], key_field: str, prefix: str
) -> DataStream:
    """The records of ``files`` (a source per file, its lines in order), each a dict or a
    ``RejectedRecord``; the operators' uids begin with ``prefix`` (``""`` for the input,
    as the job always named them)."""
    records = None
    for index, file in enumerate(files):
        source = FileSource.for_record_stream_format(
            StreamFormat.text_line_format(), str(file)
        ).build()
        suffix = "" if index == 0 else f"-{index}"
        lines = env.from_source(
            source, WatermarkStrategy.no_watermarks(), f"{prefix}json-lines{suffix}"
        )
        parsed = (
            lines.set_parallelism(1)
            .uid(f"{prefix}source{suffix}")
            .key_by(ConstantKey(str(file)), key_type=Types.STRING())
            .process(ParseJsonLines(key_field), output_type=Types.PICKLED_BYTE_ARRAY())
            .name(f"{prefix}parse{suffix}")
            .uid(f"{prefix}parse{suffix}")
        )
        records = parsed if records is None else records.union(parsed)
    return records


def _forget_request(record: Any) -> Any:
    """A line of the erasure requests' files as the ``ForgetKey`` it asks for (a rejected
    line, or one whose ``request_id`` is not text, as a ``RejectedRecord``)."""
    if type(record) is RejectedRecord:
        return record
    try:
        return ForgetKey(record["key"], request_id=record.get("request_id"))
    except TypeError as error:
        return RejectedRecord(rejected(str(error), input=record))


def _to_files(stream: DataStream, directory: Path, prefix: str) -> None:
    sink = (
        FileSink.for_row_format(str(directory), Encoder.simple_string_encoder())
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        .with_output_file_config(
            OutputFileConfig.builder().with_part_prefix(prefix).with_part_suffix(".jsonl").build()
        )
        .build()
    )
    stream.map(ShippedFunction(_to_json), output_type=Types.STRING()).name(
        f"{prefix}-json"
    ).sink_to(sink).name(f"{prefix}-files").uid(f"{prefix}-files")


def _to_json(value: Any) -> str:
    return to_json_line(value)


def read_json_files(directory: Path) -> list[Any]:
    """Every record of the committed ``*.jsonl`` part files under ``directory``, file by file.

    In-progress and pending files (hidden, starting with a dot) are left out: only what a
    checkpoint committed counts.
    """
    found = []
    for path in sorted(directory.rglob("*.jsonl")):
        if not path.name.startswith("."):
            found.extend(json.loads(line) for line in path.read_text().splitlines() if line)
    return found
