"""JSON lines in and out of the test jobs that run in a child process and are stopped with a
savepoint (pinned restore, rescale, stop-with-savepoint): a continuously monitored input
directory, and a sink that commits its files on checkpoints, so what a job wrote before a
savepoint is exactly what a restore does not write again.

(`tests/compat/compat_job.py` keeps its own copy: it is frozen with the release it recorded.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pyflink.common import Duration, Encoder, Types, WatermarkStrategy
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import (
    FileSink,
    FileSource,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
)

from flink_agents._shipping import ShippedFunction

DISCOVERY_INTERVAL_MS = 200
"""How often the source looks for new files in its directory."""


def read_json_lines(
    env: StreamExecutionEnvironment,
    input_dir: str,
    parse: Callable[[str], Any],
    *,
    name: str = "records",
) -> DataStream:
    """Each line of every file dropped into ``input_dir``, parsed by ``parse``, at
    parallelism 1 up to the agent's keying, so the records of a key stay in file order.
    The operators' uids are ``name`` and ``parse`` (``parse-<name>`` for another name)."""
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), input_dir)
        .monitor_continuously(Duration.of_millis(DISCOVERY_INTERVAL_MS))
        .build()
    )
    return (
        env.from_source(source, WatermarkStrategy.no_watermarks(), name)
        .set_parallelism(1)
        .uid(name)
        .map(ShippedFunction(parse), output_type=Types.PICKLED_BYTE_ARRAY())
        .set_parallelism(1)
        .name("parse")
        .uid("parse" if name == "records" else f"parse-{name}")
    )


def write_json_lines(
    stream: DataStream, output_dir: str, *, name: str = "outputs", prefix: str = "out"
) -> None:
    """Write each value of ``stream`` as one JSON line to files ``<prefix>*.jsonl`` in
    ``output_dir``, committed on checkpoints. The operators' uids are ``<name>-json`` and
    ``name``."""
    sink = (
        FileSink.for_row_format(output_dir, Encoder.simple_string_encoder())
        .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
        .with_output_file_config(
            OutputFileConfig.builder().with_part_prefix(prefix).with_part_suffix(".jsonl").build()
        )
        .build()
    )
    (
        stream.map(ShippedFunction(json.dumps), output_type=Types.STRING())
        .name(f"{name}-json")
        .uid(f"{name}-json")
        .sink_to(sink)
        .name(name)
        .uid(name)
    )
