"""The main job submitted with `flink run -py` to a standalone cluster on loopback."""

import pytest

from flink_agents.runtime.flink import read_json_files
from flink_agents.testing import StandaloneCluster
from tests.conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.flink]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("cluster")
    cluster = StandaloneCluster(work, REPO / "conf/config.yaml", rest_port=0, rpc_port=0)
    cluster.start()
    yield cluster
    cluster.stop()
    assert cluster.taskmanager_pids() == []


def test_flink_run_py_executes_the_main_job_and_commits_its_files(cluster, tmp_path):
    result = cluster.submit(
        REPO / "jobs/agent_job.py",
        "--plan", str(REPO / "plans/support_triage.yaml"),
        "--input", str(REPO / "data/support_tickets.jsonl"),
        "--output", str(tmp_path),
        "--key", "user",
        "--memory-snapshots",
        "--parallelism", "2",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "has finished" in result.stdout
    outputs = read_json_files(tmp_path / "outputs")
    errors = read_json_files(tmp_path / "errors")
    memory = read_json_files(tmp_path / "memory")
    assert len(outputs) == 40
    assert len({o["ticket"] for o in outputs if "route" in o}) == 36
    assert sorted(e["reason"] for e in errors) == [
        "invalid JSON (Unterminated string starting at, column 40)",
        "record has no key field 'user'",
    ]
    last = {m["key"]: m for m in sorted(memory, key=lambda m: m["run_sequence"])}
    assert last["ana"]["run_sequence"] == 7
    assert last["ana"]["short_term_memory"]["escalated"] == ["shipping"]
    jobs = cluster.rest("/jobs/overview")["jobs"]
    assert [job["state"] for job in jobs] == ["FINISHED"]


def test_agent_options_come_from_the_cluster_config(cluster, tmp_path):
    """conf/config.yaml sets `agent.error-policy: error-output`: a failing run is routed to
    the error files instead of failing the job."""
    data = tmp_path / "in.jsonl"
    data.write_text(
        '{"user": "a", "text": "no id: classify raises"}\n'
        '{"id": "T-1", "user": "a", "text": "refund"}\n'
    )
    result = cluster.submit(
        REPO / "jobs/agent_job.py",
        "--plan", str(REPO / "plans/support_triage.yaml"),
        "--input", str(data),
        "--output", str(tmp_path / "out"),
        "--key", "user",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (failed,) = read_json_files(tmp_path / "out/errors")
    assert (failed["kind"], failed["action"], failed["error"]) == (
        "failed_run",
        "classify",
        "KeyError: 'id'",
    )
    assert [o["ticket"] for o in read_json_files(tmp_path / "out/outputs")] == ["T-1"]
