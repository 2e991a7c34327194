"""Test-wide set-up: Flink's Python workers must import the test agents by module name."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Python workers are started by the JVM, which inherits this environment: put the repository
# on their path so plans naming tests.* modules bind there too.
_paths = [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(_paths))
