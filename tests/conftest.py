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

# Embedded stores (the SQLite action log) write under the data directory: keep test runs out
# of the user's home and away from each other.
if "FLINK_AGENTS_DATA_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["FLINK_AGENTS_DATA_DIR"] = tempfile.mkdtemp(prefix="flink-agents-tests-")
    atexit.register(shutil.rmtree, os.environ["FLINK_AGENTS_DATA_DIR"], ignore_errors=True)


# A real PostgreSQL server (the shared action log's backend) for every test directory, started
# once per session from the machine's binaries; tests that use it skip where there are none.
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from flink_agents.testing.postgres import PostgresServer, find_postgres_bindir  # noqa: E402


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    if find_postgres_bindir() is None:
        pytest.skip("no PostgreSQL server binaries (initdb) under /usr/lib/postgresql or PATH")
    with PostgresServer() as server:
        yield server

# The machines that run the suite are shared and loaded: a property test's example may take
# far longer than hypothesis's 200 ms deadline for no fault of the code. Timing is measured in
# bench/, never asserted in tests.
from hypothesis import settings  # noqa: E402

settings.register_profile("shared-machine", deadline=None)
settings.load_profile("shared-machine")
