"""Savepoints of a job a test or benchmark started in-process (``execute_async``)."""

from __future__ import annotations

from pyflink.common import CompletableFuture, JobClient
from pyflink.java_gateway import get_gateway


def stop_with_savepoint(client: JobClient, directory: str, native: bool = False) -> str:
    """Stop the job with a savepoint in ``directory``; its path. The savepoint is in Flink's
    canonical format (any backend restores it), or with ``native`` in the backend's own
    (ForSt takes no canonical savepoint).

    PyFlink 2.3's ``JobClient.stop_with_savepoint`` calls a Java overload Flink 2 no longer
    has (it takes the savepoint's format now), so this calls the Java method itself.
    """
    formats = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType
    savepoint_format = formats.NATIVE if native else formats.CANONICAL
    stopped = client._j_job_client.stopWithSavepoint(False, directory, savepoint_format)
    return CompletableFuture(stopped, str).result()
