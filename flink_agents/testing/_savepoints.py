"""Savepoints of a job a test or benchmark started in-process (``execute_async``)."""

from __future__ import annotations

from pyflink.common import CompletableFuture, JobClient
from pyflink.java_gateway import get_gateway


def stop_with_savepoint(client: JobClient, directory: str) -> str:
    """Stop the job with a savepoint (Flink's canonical format) in ``directory``; its path.

    PyFlink 2.3's ``JobClient.stop_with_savepoint`` calls a Java overload Flink 2 no longer
    has (it takes the savepoint's format now), so this calls the Java method itself.
    """
    canonical = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType.CANONICAL
    stopped = client._j_job_client.stopWithSavepoint(False, directory, canonical)
    return CompletableFuture(stopped, str).result()
