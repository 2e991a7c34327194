"""No file Flink writes while our jobs run holds a secret from the environment.

Beam's DefaultJobBundleFactory logs the Python worker's environment, every variable, when it
closes it; with OPENAI_API_KEY set the key used to land in PyFlink's log. Each job here runs
in a child process with a fake key in its environment, then every file under every place
Flink logs to is searched for the key. (The standalone cluster: tests/cluster/test_submit.py.)
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyflink
import pytest

from flink_agents.runtime.flink import _logging
from flink_agents.testing import StandaloneCluster, clean_environment
from tests.conftest import REPO
from tests.security.leaks import PYFLINK_LOG_DIR, fake_key, files_holding, temp_entries_since

PROJECT_LOG4J = REPO / "conf" / "log4j.properties"


def run_job(kind: str, log_dir: Path, **variables: str | None) -> tuple[str, list, list[Path]]:
    """Run ``tests.security.jobs KIND`` with a fake key in its environment (and ``variables``,
    None to remove one); returns the key, the job's outputs and every place its Flink may
    have written to."""
    key = fake_key()
    env = clean_environment()
    env.update(OPENAI_API_KEY=key, FLINK_LOG_DIR=str(log_dir))
    for name, value in variables.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    started = time.time() - 1
    result = subprocess.run(
        [sys.executable, "-m", "tests.security.jobs", kind],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    outputs = json.loads(result.stdout.strip().splitlines()[-1])
    assert outputs
    assert any(log_dir.glob("flink-*-python-*.log")), f"no Flink log in {log_dir}"
    return key, outputs, [log_dir, PYFLINK_LOG_DIR, *temp_entries_since(started)]


@pytest.mark.flink
def test_a_pyflink_job_under_the_test_suites_logging_leaves_no_key_in_any_log(tmp_path):
    """The suite's set-up (tests/conftest.py) points every JVM PyFlink starts at the project's
    log4j file, which its children inherit."""
    key, _, places = run_job("pyflink", tmp_path / "log")
    assert files_holding(key, places) == {}
    assert os.environ.get("LOG4J_PROPERTIES") == str(PROJECT_LOG4J)
    (log,) = (tmp_path / "log").glob("flink-*-python-*.log")
    assert "PythonWorker" in log.read_text()  # the log is written, the Python worker's too


@pytest.mark.flink
@pytest.mark.parametrize("mode", ["process", "thread"])
def test_an_agent_job_in_a_users_process_leaves_no_key_in_any_log(tmp_path, mode):
    """A user's process with PyFlink's own log4j configuration (no LOG4J_PROPERTIES): running
    the agent switches the environment-dumping logger off in the JVM, in process mode (set
    by the job: Beam starts a worker process and logs its environment) and in thread mode
    (our default)."""
    log_dir = tmp_path / "log"
    key, outputs, places = run_job(mode, log_dir, LOG4J_PROPERTIES=None)
    assert {o["thread_mode"] for o in outputs} == {mode == "thread"}  # the mode it claims
    assert files_holding(key, places) == {}
    (log,) = log_dir.glob("flink-*-python-*.log")
    assert "MiniCluster" in log.read_text()


def _levels(properties: Path) -> dict[str, str]:
    """Logger name -> level, from a log4j2 properties file."""
    entries = {}
    for line in properties.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            entries[name.strip()] = value.strip()
    return {
        entries[key]: entries.get(key[: -len(".name")] + ".level", "")
        for key in entries
        if key.startswith("logger.") and key.endswith(".name")
    }


def test_the_project_log4j_file_raises_every_logger_that_writes_the_environment():
    levels = _levels(PROJECT_LOG4J)
    assert _logging.SECRET_LOGGERS
    assert {name: levels.get(name) for name in _logging.SECRET_LOGGERS} == _logging.SECRET_LOGGERS


def test_without_the_project_file_pyflinks_configuration_gets_the_loggers_off(
    tmp_path, monkeypatch
):
    """An installed package has no conf/: PyFlink's own file plus the same loggers off."""
    monkeypatch.setattr(_logging, "_PROJECT_LOG4J", tmp_path / "absent.properties")
    assert _logging.project_log4j() is None
    assert _logging.use_project_logging({}) is None
    written = tmp_path / "log4j.properties"
    written.write_text(_logging.log4j_text())
    levels = _levels(written)
    assert {name: levels.get(name) for name in _logging.SECRET_LOGGERS} == _logging.SECRET_LOGGERS
    assert "appender.main.fileName = ${sys:log.file}" in written.read_text()


@pytest.mark.flink
def test_silence_secret_loggers_raises_the_loggers_in_a_running_jvm_and_never_lowers_them():
    """For a JVM that started with another configuration (a user's process)."""
    from pyflink.java_gateway import get_gateway

    log4j = get_gateway().jvm.org.apache.logging.log4j
    configurator = log4j.core.config.Configurator
    client = "org.apache.flink.client.python.PythonEnvUtils"
    for name in _logging.SECRET_LOGGERS:
        configurator.setLevel(name, log4j.Level.INFO)
    configurator.setLevel(client, log4j.Level.ERROR)
    assert _logging.silence_secret_loggers()
    levels = {n: str(log4j.LogManager.getLogger(n).getLevel()) for n in _logging.SECRET_LOGGERS}
    assert levels == {**_logging.SECRET_LOGGERS, client: "ERROR"}
    configurator.setLevel(client, log4j.Level.INFO)
    assert _logging.silence_secret_loggers()
    assert str(log4j.LogManager.getLogger(client).getLevel()) == "WARN"


def test_use_project_logging_keeps_a_configuration_chosen_already():
    environ: dict[str, str] = {}
    assert _logging.use_project_logging(environ) == PROJECT_LOG4J
    assert environ == {"LOG4J_PROPERTIES": str(PROJECT_LOG4J)}
    mine = {"LOG4J_PROPERTIES": "/etc/my-log4j.properties"}
    assert _logging.use_project_logging(mine) == Path("/etc/my-log4j.properties")
    assert mine == {"LOG4J_PROPERTIES": "/etc/my-log4j.properties"}


def test_the_standalone_clusters_every_log4j_file_is_the_project_file(tmp_path):
    cluster = StandaloneCluster(tmp_path, REPO / "conf/config.yaml", rest_port=0, rpc_port=0)
    cluster.write_config()
    shipped = {p.name for p in (Path(pyflink.__file__).parent / "conf").glob("log4j*.properties")}
    assert shipped <= set(_logging.LOG4J_FILES)  # every file Flink's scripts may read
    for name in _logging.LOG4J_FILES:
        assert (cluster.conf_dir / name).read_text() == PROJECT_LOG4J.read_text(), name
