"""The agent dispatcher's metrics reach an OTLP collector through Flink's own OpenTelemetry
metric reporter (``pyflink/plugins/metrics-otel``), exported to a real OTLP receiver on
loopback while the job of tests/runtime/flink/agent_metrics_job.py runs: the same values as
the Prometheus reporter serves (tests/runtime/flink/test_agent_metrics.py).

As in the Prometheus tests, PyFlink's MiniCluster loads no plugins, so the reporter's jar goes
on the child JVM's class path through ``HADOOP_CLASSPATH``. The reporter names a metric
``flink.<logical scope>.<name>`` and exports Flink's scope variables as data point attributes
(``operator_name``, ``subtask_index``, ... and the ``action`` of a key-value group); counters
are delta sums, so a counter's value is the sum of its exported points.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyflink
import pytest

from tests.children import REPO, child_environment
from tests.runtime.flink.test_agent_metrics import EXPECTED
from tests.tracing.otlp_receiver import OtlpReceiver

pytestmark = [pytest.mark.flink, pytest.mark.slow]

OTEL_JAR = next((Path(pyflink.__file__).parent / "plugins" / "metrics-otel").glob("*.jar"))
OTEL_FACTORY = "org.apache.flink.metrics.otel.OpenTelemetryMetricReporterFactory"
OPERATOR_SCOPE = "flink.taskmanager.job.task.operator."
KEY_VALUE_GROUPS = ("action", "function", "model")
OPERATOR = "agent:HeldAgent"
SERVICE = "flink-agents-otel-test"


def reporter_options(receiver: OtlpReceiver, protocol: str) -> dict[str, str]:
    """The reporter's configuration, as a user's ``config.yaml`` holds it, exporting to
    ``receiver`` over ``protocol`` (``gRPC`` or ``HTTP``) every half second."""
    endpoint = (
        receiver.grpc_endpoint if protocol == "gRPC" else f"{receiver.http_endpoint}/v1/metrics"
    )
    return {
        "metrics.reporter.otel.factory.class": OTEL_FACTORY,
        "metrics.reporter.otel.exporter.endpoint": endpoint,
        "metrics.reporter.otel.exporter.protocol": protocol,
        "metrics.reporter.otel.interval": "500 ms",
        "metrics.reporter.otel.service.name": SERVICE,
    }


def agent_metrics(metrics: list[dict[str, Any]], operator: str) -> dict[str, dict[str, Any]]:
    """``operator``'s metrics by the dotted name the agent gave them (``numOfActionsExecuted``,
    ``action.reply.replies``, ...): each with its ``value`` (a delta sum's points added up, a
    gauge's last point), and the ``type``, ``temporality``, ``attributes`` and ``resource``
    of its last export."""
    found: dict[str, dict[str, Any]] = {}
    for metric in metrics:
        if not metric["name"].startswith(OPERATOR_SCOPE):
            continue
        for point in metric["points"]:
            labels = point["attributes"]
            if labels.get("operator_name") != operator:
                continue
            name = metric["name"][len(OPERATOR_SCOPE) :]
            group = name.split(".", 1)[0]
            if group in KEY_VALUE_GROUPS and group in labels:
                name = f"{group}.{labels[group]}.{name[len(group) + 1 :]}"
            summed = metric.get("temporality") == "DELTA"
            previous = found.get(name, {}).get("value", 0) if summed else 0
            found[name] = {
                "value": previous + point["value"] if summed else point["value"],
                "type": metric["type"],
                "temporality": metric.get("temporality"),
                "attributes": labels,
                "resource": metric["resource"],
            }
    return found


def values(found: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {name: entry["value"] for name, entry in found.items()}


def export_while_running(
    receiver: OtlpReceiver, protocol: str, mode: str, tmp_path: Path
) -> dict[str, dict[str, Any]]:
    """Run the agent metrics job with the OpenTelemetry reporter exporting to ``receiver``
    until the agent's metrics there show ``EXPECTED`` (or three minutes pass), release the
    job and check it ended well; the agent's metrics as ``agent_metrics`` reads them."""
    release = tmp_path / "release"
    options = [
        f"--option={key}={value}" for key, value in reporter_options(receiver, protocol).items()
    ]
    job = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.runtime.flink.agent_metrics_job",
            f"--release-file={release}",
            f"--mode={mode}",
            *options,
        ],
        cwd=REPO,
        env={**child_environment(), "HADOOP_CLASSPATH": str(OTEL_JAR)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def done() -> bool:
        found = values(agent_metrics(receiver.metrics(), OPERATOR))
        return job.poll() is not None or all(found.get(k) == v for k, v in EXPECTED.items())

    try:
        # Checked after every export, and every few seconds besides: a job that died sends
        # nothing more.
        deadline = time.monotonic() + 180
        while not done() and time.monotonic() < deadline:
            receiver.wait_for(done, timeout=min(5.0, max(0.0, deadline - time.monotonic())))
    finally:
        release.touch()
        try:
            output, _ = job.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            job.kill()
            output, _ = job.communicate()
    assert job.returncode == 0, output[-4000:]
    return agent_metrics(receiver.metrics(), OPERATOR)


# Each protocol once and each execution mode once: the reporter runs in the JVM, the same way
# in both modes, and the mode only changes how the values reach Flink's metric objects.
@pytest.mark.parametrize(("mode", "protocol"), [("thread", "gRPC"), ("process", "HTTP")])
def test_the_otel_reporter_exports_the_dispatchers_metrics(mode, protocol, tmp_path):
    with OtlpReceiver() as receiver:
        found = export_while_running(receiver, protocol, mode, tmp_path)
    assert {name: values(found).get(name) for name in EXPECTED} == EXPECTED, sorted(found)
    assert found["numOfParkedRuns"]["value"] == 0
    [calls] = [
        entry["value"]
        for name, entry in found.items()
        if name.startswith("function.") and name.endswith(".numOfDurableCalls")
    ]
    assert calls == 4  # per function: the agent's one durable function

    executed = found["numOfActionsExecuted"]
    assert (executed["type"], executed["temporality"]) == ("sum", "DELTA")
    assert executed["attributes"]["operator_name"] == OPERATOR
    assert executed["attributes"]["subtask_index"] == "0"
    assert executed["attributes"]["job_name"] == "agent-metrics-test"
    assert executed["resource"]["service.name"] == SERVICE
    assert found["action.reply.numOfActionsExecuted"]["attributes"]["action"] == "reply"
    assert found["numOfParkedRuns"]["type"] == "gauge"
