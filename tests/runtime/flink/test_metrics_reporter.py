"""Agent metrics reach a real reporter: Flink's Prometheus reporter (shipped in the pyflink
package's ``plugins/``), scraped over HTTP on loopback while a MiniCluster job runs.

A MiniCluster started by PyFlink loads no plugins (its plugin manager is empty), so the
reporter's jar goes on the JVM's class path instead, through ``HADOOP_CLASSPATH``, which
PyFlink's gateway launcher appends; the job runs in a child process so that the variable
reaches a fresh JVM. On a standalone cluster the ``plugins/`` directory works as is
(``conf/config.yaml``).
"""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyflink
import pytest

from tests.children import REPO, child_environment
from tests.runtime.flink.metrics_job import PARKED_RUNS, VALUES

PROMETHEUS_JAR = next(
    (Path(pyflink.__file__).parent / "plugins" / "metrics-prometheus").glob("*.jar")
)
SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][\w:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
OPERATOR = "flink_taskmanager_job_task_operator_"

pytestmark = [pytest.mark.flink, pytest.mark.slow]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def scrape(port: int) -> list[tuple[str, dict[str, str], float]]:
    """The samples the reporter serves: (name, labels, value)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples = []
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match is None or line.startswith("#"):
            continue
        labels = dict(LABEL.findall(match["labels"] or ""))
        samples.append((match["name"], labels, float(match["value"])))
    return samples


def ours(
    samples: list[tuple[str, dict[str, str], float]], operator: str = "metered"
) -> dict[str, float]:
    """Our operator's samples by name without the scope prefix, with key-value labels
    (action, function, model) written back into the name as Flink's dotted path."""
    found = {}
    for name, labels, value in samples:
        if labels.get("operator_name") != operator or not name.startswith(OPERATOR):
            continue
        short = name[len(OPERATOR) :]
        for key in ("action", "function", "model"):
            if key in labels and short.startswith(f"{key}_"):
                short = f"{key}.{labels[key]}.{short[len(key) + 1 :]}"
        found[short] = value
    return found


EXPECTED = {
    "numOfEventProcessed": len(VALUES),
    "numOfActionsExecuted": len(VALUES),
    "numOfInputRunsStarted": len(VALUES),
    "numOfInputRunsSucceeded": len(VALUES),
    "numOfInputRunsFailed": 0,
    "numOfDurableCalls": len(VALUES),
    "numOfParkedRuns": PARKED_RUNS,
    "action.echo.numOfActionsExecuted": len(VALUES),
    "action.echo.customSeen": sum(VALUES),
    "custom_lastValue": VALUES[-1],
    "function.lookup.numOfDurableCalls": len(VALUES),
    "function.lookup.durableCallLatencyMs_count": len(VALUES),
    "function.lookup.durableCallLatencyMs_min": 10 * min(VALUES),
    "function.lookup.durableCallLatencyMs_max": 10 * max(VALUES),
    "function.lookup.durableCallLatencyMs_mean": 10 * sum(VALUES) / len(VALUES),
    "model.scripted.numOfRequests": len(VALUES),
    "model.scripted.promptTokens": sum(VALUES),
    "model.scripted.completionTokens": 2 * len(VALUES),
}


def reporter_environment() -> dict[str, str]:
    """A child's environment (``child_environment``) with the reporter's jar on the class
    path."""
    return {**child_environment(), "HADOOP_CLASSPATH": str(PROMETHEUS_JAR)}


def scrape_while_running(
    job_module: str, mode: str, tmp_path: Path, operator: str, expected: dict[str, float]
) -> dict[str, float]:
    """Run ``python -m job_module`` (a job holding its last record until released) with the
    Prometheus reporter on a free port, scrape ``operator``'s samples until they show
    ``expected`` (or three minutes pass), release the job and check it ended well."""
    port = free_port()
    release = tmp_path / "release"
    job = subprocess.Popen(
        [
            sys.executable,
            "-m",
            job_module,
            "--port",
            str(port),
            "--release-file",
            str(release),
            "--mode",
            mode,
        ],
        cwd=REPO,
        env=reporter_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    found: dict[str, float] = {}
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and job.poll() is None:
            with contextlib.suppress(OSError):  # the reporter is not up yet
                found = ours(scrape(port), operator)
            if all(found.get(name) == value for name, value in expected.items()):
                break
            time.sleep(0.5)
    finally:
        release.touch()
        try:
            output, _ = job.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            job.kill()
            output, _ = job.communicate()
    assert job.returncode == 0, output[-4000:]
    return found


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_prometheus_reporter_serves_the_agent_metrics(mode, tmp_path):
    found = scrape_while_running(
        "tests.runtime.flink.metrics_job", mode, tmp_path, "metered", EXPECTED
    )
    assert {name: found.get(name) for name in EXPECTED} == EXPECTED
    # The meters are Flink's MeterViews fed by the counters' deltas.
    assert "numOfEventProcessedPerSec" in found
