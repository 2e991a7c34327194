"""What the soaks read from a running cluster: processes' memory, the SQLite log's file,
Flink's metrics and checkpoint statistics."""

from __future__ import annotations

import contextlib
import os
import time
import urllib.error
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from flink_agents.runtime.action_log import ActionLog, open_action_log
from flink_agents.testing import StandaloneCluster, process_tree

_REST_ERRORS = (urllib.error.URLError, ConnectionError, TimeoutError, KeyError, ValueError)


def rss_mib(pid: int) -> float:
    """Resident memory of one process (VmRSS from /proc; 0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def python_workers(taskmanager: int) -> list[int]:
    """The Python processes below a TaskManager (its Python workers: none in thread mode,
    where Python runs inside the TaskManager's JVM and its memory is the JVM's)."""
    found = []
    for pid in process_tree(taskmanager)[1:]:
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if name.startswith("python"):
            found.append(pid)
    return found


def file_mib(database: Path) -> float:
    """The SQLite log's size on disk: the database with its write-ahead log and index."""
    total = 0
    for suffix in ("", "-wal", "-shm"):
        path = database.with_name(database.name + suffix)
        if path.exists():
            total += path.stat().st_size
    return total / 2**20


def wal_mib(database: Path) -> float:
    """The SQLite log's write-ahead log alone (0 when there is none)."""
    path = database.with_name(database.name + "-wal")
    return path.stat().st_size / 2**20 if path.exists() else 0.0


def tree_kib(directory: Path) -> float:
    """The bytes of the files under ``directory`` (0 if it is gone), in KiB."""
    total = 0
    for root, _, names in os.walk(directory):
        for name in names:
            with contextlib.suppress(OSError):  # a checkpoint discarded meanwhile
                total += os.stat(os.path.join(root, name)).st_size
    return total / 1024


def records_in(cluster: StandaloneCluster, job_id: str) -> int:
    """Records the agent operator has taken in so far (Flink's ``read-records`` metric; it
    starts again from 0 when the job restarts)."""
    try:
        for vertex in cluster.rest(f"/jobs/{job_id}")["vertices"]:
            if vertex["name"].startswith("agent:"):
                return int(vertex["metrics"]["read-records"])
    except _REST_ERRORS:
        pass
    return 0


def checkpoint_stats(cluster: StandaloneCluster, job_id: str) -> dict[str, Any]:
    """``/jobs/<id>/checkpoints``: counts, and the latest completed checkpoint (its
    ``state_size``, ``checkpointed_size``, ``end_to_end_duration``); {} when unanswered."""
    try:
        return cluster.rest(f"/jobs/{job_id}/checkpoints")
    except _REST_ERRORS:
        return {}


@contextmanager
def open_when_created(database: Path, timeout: float = 120) -> Iterator[ActionLog]:
    """The job's SQLite log, opened once the job created it (its Python worker sets it up)."""
    deadline = time.monotonic() + timeout
    while not database.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    log = open_action_log(f"sqlite://{database}")
    log.setup()
    try:
        yield log
    finally:
        log.close()
