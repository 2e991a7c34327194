"""Test-wide set-up: Flink's Python workers must import the test agents by module name."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

pytest_plugins = ["flink_agents.testing.pytest_plugin"]

# Python workers are started by the JVM, which inherits this environment: put the repository
# on their path so plans naming tests.* modules bind there too. PyFlink's thread mode runs
# Python inside the JVM, which finds the venv's packages only through PYTHONPATH.
import site  # noqa: E402

_paths = [
    str(REPO),
    *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)),
    *site.getsitepackages(),
]
os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(_paths))

# Every JVM that PyFlink starts here or in a child process logs with the project's log4j file,
# which keeps the Python worker's environment (API keys) out of Flink's logs.
os.environ["LOG4J_PROPERTIES"] = str(REPO / "conf" / "log4j.properties")

# Everything the session's processes put in a temporary directory goes under one directory of
# its own, removed at the end: Python's and Beam's temporary files, and the JVMs' (Flink
# extracts a 24 MB RPC jar per JVM and keeps blobs there; a TaskManager killed by a recovery
# test never deletes them, so a suite run used to leave about 0.7 GB in /tmp). pytest's own
# base directory stays where it was, with its retention of the last few runs.
import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
SESSION_DIR = Path(tempfile.mkdtemp(prefix="flink-agents-tests-"))
atexit.register(shutil.rmtree, SESSION_DIR, ignore_errors=True)
SESSION_DIR.chmod(0o755)
SESSION_TMP = SESSION_DIR / "tmp"
SESSION_TMP.mkdir()
SESSION_TMP.chmod(0o1777)  # as /tmp: the PostgreSQL server runs as its own user
os.environ["TMPDIR"] = str(SESSION_TMP)
tempfile.tempdir = None  # computed again, from TMPDIR
os.environ["JVM_ARGS"] = " ".join(
    [os.environ.get("JVM_ARGS", ""), f"-Djava.io.tmpdir={SESSION_TMP}"]
).strip()

# Embedded stores (the SQLite action log) write under the data directory: keep test runs out
# of the user's home and away from each other.
(SESSION_DIR / "data").mkdir()
os.environ.setdefault("FLINK_AGENTS_DATA_DIR", str(SESSION_DIR / "data"))


import gc  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from flink_agents.testing.postgres import PostgresServer, find_postgres_bindir  # noqa: E402


# A real PostgreSQL server (the shared action log's backend) for every test directory, started
# once per session from the machine's binaries; tests that use it skip where there are none.
@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    if find_postgres_bindir() is None:
        pytest.skip("no PostgreSQL server binaries (initdb) under /usr/lib/postgresql or PATH")
    with PostgresServer() as server:
        yield server


# PyFlink runs a MiniCluster job's Python workers in this process (loopback mode), and leaves
# threads behind when the job ends (PyFlink 2.3): each output stream of a Python operator
# starts a flusher that wakes every second (``BeamTimeBasedOutputStream``), and each job
# starts a gRPC server for its workers whose thread polls every second (the servicer is a
# singleton whose ``__init__`` forgets the server it started). Left alone, the suite gathered
# over a thousand of them, all waking for the GIL: on a loaded machine every later test
# crawled and the session took many minutes to end. No job outlives its test here (module
# fixtures collect theirs before they return), so after each test they are stopped.
@pytest.fixture(autouse=True)
def _stop_threads_of_finished_jobs() -> Iterator[None]:
    yield
    utils = sys.modules.get("pyflink.fn_execution.utils.operation_utils")
    grpc_server = sys.modules.get("grpc._server")
    serving = False
    for thread in threading.enumerate():
        if utils is not None and isinstance(thread, utils.PeriodicThread):
            thread.cancel()
        if grpc_server is not None and getattr(thread, "_target", None) is grpc_server._serve:
            serving = True
    if serving:
        for found in gc.get_objects():
            if isinstance(found, grpc_server._Server):
                found.stop(None)


# The machines that run the suite are shared and loaded: a property test's example may take
# far longer than hypothesis's 200 ms deadline for no fault of the code. Timing is measured in
# bench/, never asserted in tests.
from hypothesis import settings  # noqa: E402

settings.register_profile("shared-machine", deadline=None)
settings.load_profile("shared-machine")


# A hung test fails after pytest-timeout's ``timeout`` with every thread's stack and its
# captured stdout and stderr, but not its captured log records. The bounds' stall report
# (``ParkedRuns``: what a runner's thread has waited for, once a minute) is what says why
# such a wait does not end, so it goes to stderr as well.
import logging  # noqa: E402


class _CurrentStderr(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is when a record comes (pytest's capture swaps it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


logging.getLogger("flink_agents.runtime._parking").addHandler(_CurrentStderr(logging.WARNING))
