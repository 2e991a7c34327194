"""Test-wide set-up: Flink's Python workers must import the test agents by module name."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Python workers are started by the JVM, which inherits this environment: put the repository
# on their path so plans naming tests.* modules bind there too.
_paths = [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(_paths))

# Embedded stores (the SQLite action log) write under the data directory: keep test runs out
# of the user's home and away from each other.
if "FLINK_AGENTS_DATA_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["FLINK_AGENTS_DATA_DIR"] = tempfile.mkdtemp(prefix="flink-agents-tests-")
    atexit.register(shutil.rmtree, os.environ["FLINK_AGENTS_DATA_DIR"], ignore_errors=True)
