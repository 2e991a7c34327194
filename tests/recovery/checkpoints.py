"""The recovery tests' MiniCluster jobs: each checkpoint must complete within
``CHECKPOINT_TIMEOUT``, and a job failed by one that did not fails its test saying so.

A checkpoint of a Python operator waits for its bundle to finish. One that never does (an
operator blocked in a worker: in CI, workers of a restarted job waited forever on the vector
store of a failed attempt's worker) expires only after Flink's default 10 minutes, then
again on each restart: the test failed after 20 minutes. Here checkpoints take a few
seconds, even on a loaded machine; a blocked one fails within minutes.
"""

from __future__ import annotations

from typing import Any

from pyflink.common import Configuration
from pyflink.datastream import StreamExecutionEnvironment

CHECKPOINT_TIMEOUT = "2 min"


def bounded_checkpoints() -> Configuration:
    """A job configuration whose checkpoints expire after ``CHECKPOINT_TIMEOUT``."""
    config = Configuration()
    config.set_string("execution.checkpointing.timeout", CHECKPOINT_TIMEOUT)
    return config


def execute(env: StreamExecutionEnvironment, name: str) -> Any:
    """``env.execute(name)``; a job failed by an expired checkpoint raises an
    ``AssertionError`` that says an operator was blocked."""
    try:
        return env.execute(name)
    except Exception as error:  # Py4J wraps the job's failure
        if "Checkpoint expired before completing" not in str(error):
            raise
        timeout_ms = env.get_checkpoint_config().get_checkpoint_timeout()
        raise AssertionError(
            f"job {name!r}: a checkpoint did not complete within {timeout_ms / 1000:g} s, so "
            "an operator was blocked (a Python bundle that never finished); when it happens, "
            "py-spy dump the Python workers and jstack the JVM"
        ) from error
