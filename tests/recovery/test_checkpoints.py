"""A recovery test's job (configured by ``checkpoints.py``) whose operator never finishes its
bundle fails once a checkpoint expires, and the test says why, instead of waiting for Flink's
default of 10 minutes per attempt."""

from __future__ import annotations

import sys
import time

import pytest
from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

from tests.recovery.checkpoints import bounded_checkpoints, execute

pytestmark = [pytest.mark.slow, pytest.mark.flink]


def block(value: int) -> int:
    """Holds its worker's bundle longer than the checkpoint timeout below, element after
    element."""
    time.sleep(5)
    return value


def test_a_blocked_operator_fails_its_job_once_a_checkpoint_expires(monkeypatch) -> None:
    # A real worker process (not a thread of this one), which a cancelled job leaves to finish
    # its sleep on its own.
    monkeypatch.setenv("_python_worker_execution_mode", "process")
    config = bounded_checkpoints()
    config.set_string("execution.checkpointing.timeout", "1 s")  # the expiry itself, quickly
    config.set_string("restart-strategy.type", "none")
    config.set_string("python.execution-mode", "process")
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_python_executable(sys.executable)  # the worker imports this module, with PyFlink
    env.set_parallelism(1)
    env.enable_checkpointing(200)
    numbers = env.from_source(
        NumberSequenceSource(0, 10**9), WatermarkStrategy.no_watermarks(), "numbers"
    )
    numbers.map(block, output_type=Types.LONG()).filter(lambda _: False).print()
    with pytest.raises(AssertionError, match="a checkpoint did not complete within 1 s"):
        execute(env, "blocked")
