"""The main job submitted with `flink run -py` to a standalone cluster on loopback."""

import time

import pytest

from flink_agents.runtime.flink import read_json_files
from flink_agents.testing import StandaloneCluster
from tests.conftest import REPO
from tests.runtime.flink.test_script_jobs import EXPECTED, outputs
from tests.security.leaks import PYFLINK_LOG_DIR, fake_key, files_holding, temp_entries_since

pytestmark = [pytest.mark.slow, pytest.mark.flink]

# The daemons, their Python workers and `flink run` all have a (fake) API key in their
# environment, as a user's cluster would: no file the cluster writes may hold it.
SECRET = fake_key()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    started = time.time() - 1
    work = tmp_path_factory.mktemp("cluster")
    cluster = StandaloneCluster(
        work, REPO / "conf/config.yaml", rest_port=0, rpc_port=0, env={"OPENAI_API_KEY": SECRET}
    )
    cluster.start()
    yield cluster
    cluster.stop()
    assert cluster.taskmanager_pids() == []
    assert files_holding(SECRET, written_by(cluster, started)) == {}  # shut-down messages too


def written_by(cluster: StandaloneCluster, started: float) -> list:
    """Every place the cluster and its jobs may have written to."""
    return [cluster.work_dir, PYFLINK_LOG_DIR, *temp_entries_since(started)]


def test_flink_run_py_executes_the_main_job_and_commits_its_files(cluster, tmp_path):
    started = time.time() - 1
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
    # The key in every process's environment is in no file: Beam logs a Python worker's
    # environment when it closes it (TaskManager), `flink run` its Python process's (client).
    logs = sorted(p.name for p in cluster.log_dir.iterdir())
    assert any("taskexecutor" in name for name in logs) and any("client" in name for name in logs)
    assert files_holding(SECRET, written_by(cluster, started)) == {}
    assert SECRET not in result.stdout + result.stderr


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


def test_flink_run_py_runs_a_one_file_job_whose_agent_is_defined_in_the_script(cluster, tmp_path):
    """``flink run -py my_job.py``: the cluster's workers get the script's agent, events,
    tool and resource provider by value; their ``__main__`` is not the script."""
    script = REPO / "tests/runtime/flink/scripts/one_file_job.py"
    out = tmp_path / "outputs.jsonl"
    result = cluster.submit(script, "default", str(out))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert outputs(out) == EXPECTED
