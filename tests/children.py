"""Running a job or a probe in a child process, as a user's job runs.

A child process is a TaskManager of its own: in thread mode the Python interpreter is the
MiniCluster JVM's, shared by every job run in it, so what one test's job leaves in it (an
open dispatcher, a raised collector threshold, threads) would be seen by the next. The
child starts from ``child_environment``, without what an earlier job of this process left
in its environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
CHILD_TIMEOUT_S = 400


def child_environment() -> dict[str, str]:
    """This environment without what a PyFlink job in this process left behind
    (``FLINK_*`` / ``PYFLINK_*``, and the address of its loopback worker server, which a
    child's process-mode workers would otherwise dial long after that server is gone; the
    data directory's variable is ours and stays)."""
    return {
        name: value
        for name, value in os.environ.items()
        if name.startswith("FLINK_AGENTS_")
        or not (
            name.startswith(("FLINK_", "PYFLINK_", "_PYFLINK"))
            or name == "PYTHON_LOOPBACK_SERVER_ADDRESS"
        )
    }


def _run(argv: list[str], what: str) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` after this interpreter in a child process; the test fails, naming
    ``what``, when it hangs."""
    try:
        return subprocess.run(
            [sys.executable, *argv],
            cwd=REPO,
            env=child_environment(),
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"{what} hung: {error}")


def run_child_job(module: str, spec_file: Path, what: str) -> dict[str, Any]:
    """Run the job ``module`` with ``spec_file`` in a child process, as a user's job runs;
    the JSON of its last ``RESULT`` line. The test fails, naming ``what``, when the child
    hangs, fails or prints no result."""
    done = _run(["-m", module, str(spec_file)], what)
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not results:
        pytest.fail(
            f"{what} failed (exit {done.returncode}):\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
        )
    return json.loads(results[-1].removeprefix("RESULT "))


def run_child_main(module: str, *args: str) -> Any:
    """Call ``module.main()`` in a child process (``args`` in its ``sys.argv``); the JSON its
    last line of output holds. The module is imported by its name, not run as
    ``__main__``, so that an agent and a probe it defines share its globals in the
    interpreter that runs them."""
    done = _run(["-c", f"import {module} as test; test.main()", *args], module)
    if done.returncode != 0:
        pytest.fail(f"{module} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
