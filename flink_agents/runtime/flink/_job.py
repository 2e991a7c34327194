"""The main job: JSON lines from files, an agent per key, JSON lines into files.

Used by ``jobs/agent_job.py`` (``flink run -py``) and by the demo in MiniCluster. Bad lines
and records without a key go to the error files with the reason; so do failed runs under
the ``error-output`` policy. The file sinks commit on checkpoints, so every output appears
exactly once even when the job restarts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyflink.common import Encoder, Types, WatermarkStrategy
from pyflink.datastream import DataStream, OutputTag, ProcessFunction, StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import (
    BucketAssigner,
    FileSink,
    FileSource,
    OutputFileConfig,
    StreamFormat,
)

from flink_agents._shipping import ShippedByName, ShippedFunction
from flink_agents.plan import AgentPlan
from flink_agents.runtime._records import BadRecord, parse_json_object, to_json_line
from flink_agents.runtime.flink._environment import FlinkExecutionEnvironment

REJECTED_TAG = OutputTag("rejected-records", Types.PICKLED_BYTE_ARRAY())


@dataclass(frozen=True)
class JobPaths:
    """Where the job reads and writes; each output directory gets ``*.jsonl`` part files."""

    input: Path
    output: Path
    errors: Path
    memory: Path | None = None


class ParseJsonLines(ShippedByName, ProcessFunction):
    """A line to a dict record; bad lines and records without the key go to ``REJECTED_TAG``."""

    def __init__(self, key_field: str) -> None:
        self.key_field = key_field

    def process_element(self, line: str, ctx: ProcessFunction.Context) -> Any:
        text = line.strip()
        if not text:
            return
        try:
            record = parse_json_object(text)
        except BadRecord as error:
            yield REJECTED_TAG, _rejected(text, str(error))
            return
        if self.key_field not in record:
            yield REJECTED_TAG, _rejected(text, f"record has no key field {self.key_field!r}")
        else:
            yield record


def build_agent_job(
    env: StreamExecutionEnvironment,
    plan: AgentPlan,
    paths: JobPaths,
    key_field: str,
    checkpoint_interval_ms: int = 2000,
    **options: Any,
) -> None:
    """Add the source, the agent and the sinks to ``env``; call ``env.execute`` after."""
    env.enable_checkpointing(checkpoint_interval_ms)
    source = FileSource.for_record_stream_format(
        StreamFormat.text_line_format(), str(paths.input)
    ).build()
    lines = env.from_source(source, WatermarkStrategy.no_watermarks(), "json-lines").uid("source")
    records = lines.process(ParseJsonLines(key_field), output_type=Types.PICKLED_BYTE_ARRAY())
    records = records.name("parse").uid("parse")
    agents = FlinkExecutionEnvironment(env, **options)
    builder = agents.from_datastream(records, key_field).apply(plan)
    _to_files(builder.to_datastream(), paths.output, "outputs")
    failures = records.get_side_output(REJECTED_TAG).union(
        builder.error_stream().map(ShippedFunction(_failed_run))
    )
    _to_files(failures, paths.errors, "errors")
    if paths.memory is not None:
        _to_files(builder.memory_stream(), paths.memory, "memory")


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


def _rejected(raw: str, reason: str) -> dict[str, Any]:
    return {"kind": "rejected", "raw": raw, "reason": reason}


def _failed_run(error: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "failed_run", **error}


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
