"""Agent options: defaults, Flink's config.yaml `agent:` section, and code, in that order."""

import pytest
import yaml

from flink_agents.api import FlinkAgentsError
from flink_agents.runtime._options import AgentOptions, load_options
from tests.conftest import REPO


def write_config(directory, data):
    (directory / "config.yaml").write_text(yaml.safe_dump(data))
    return str(directory)


def test_defaults_without_a_config_directory(monkeypatch):
    monkeypatch.delenv("FLINK_CONF_DIR", raising=False)
    assert load_options() == AgentOptions()
    assert AgentOptions().error_policy == "fail"


def test_nested_and_flat_agent_keys_are_read_and_code_wins(tmp_path):
    conf = write_config(
        tmp_path,
        {"agent": {"num-async-threads": 8, "error-policy": "retry"}, "agent.max-in-flight": 32},
    )
    options = load_options({"error_policy": "error-output"}, conf_dir=conf)
    assert (options.num_async_threads, options.max_in_flight) == (8, 32)
    assert options.error_policy == "error-output"


def test_flink_conf_dir_is_the_default_place(tmp_path, monkeypatch):
    monkeypatch.setenv("FLINK_CONF_DIR", write_config(tmp_path, {"agent": {"max-in-flight": 3}}))
    assert load_options().max_in_flight == 3


def test_invalid_options_name_the_file_and_the_option(tmp_path):
    conf = write_config(tmp_path, {"agent": {"error-policy": "ignore"}})
    with pytest.raises(FlinkAgentsError) as caught:
        load_options(conf_dir=conf)
    assert str(caught.value) == (
        f"{tmp_path / 'config.yaml'}, line 2: agent option 'error-policy': must be 'fail', "
        "'error-output' or 'retry' (got 'ignore')"
    )
    valid = tmp_path / "valid"
    valid.mkdir()
    with pytest.raises(FlinkAgentsError) as caught:  # set in code, not in the config file
        load_options({"num_async_threads": 0}, conf_dir=write_config(valid, {"agent": {}}))
    assert str(caught.value) == (
        "agent option 'num_async_threads' passed in code: must be at least 1 (got 0)"
    )


def test_the_project_cluster_config_is_valid_and_consistent_with_docker_compose():
    options = load_options(conf_dir=str(REPO / "conf"))
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    flink = yaml.safe_load(compose["x-flink-config"]["FLINK_PROPERTIES"])
    from_compose = {k.removeprefix("agent."): v for k, v in flink.items() if k.startswith("agent.")}
    assert load_options(from_compose) == options
    conf = yaml.safe_load((REPO / "conf/config.yaml").read_text())
    assert flink["taskmanager.numberOfTaskSlots"] == conf["taskmanager"]["numberOfTaskSlots"]
    assert flink["rest.port"] == conf["rest"]["port"]


def test_retry_backoff_grows_exponentially_up_to_the_maximum():
    options = AgentOptions(retry_initial_backoff_ms=100, retry_max_backoff_ms=500)
    assert [options.retry_backoff_ms(n) for n in range(1, 6)] == [100, 200, 400, 500, 500]


def test_apache_flink_agents_option_names_in_the_config_file_are_translated(tmp_path):
    conf = write_config(
        tmp_path,
        {
            "agent": {
                "error-handling-strategy": "ignore",
                "max-retries": 4,
                "job-identifier": "reviews",
                "baseLogDir": str(tmp_path / "logs"),
                "chat": {"async": True},
                "retry-max-attempts": 2,  # ours, set as such, wins over their max-retries
            },
            "agent.tool-call.async": False,
        },
    )
    options = load_options(conf_dir=conf)
    assert options.error_policy == "error-output"
    assert options.retry_max_attempts == 2
    assert options.action_log_job == "reviews"
    assert options.event_log_dir == str(tmp_path / "logs")
    assert options.event_log_level == "standard"
    bad = write_config(tmp_path, {"agent": {"error-handling-strategy": "skip"}})
    with pytest.raises(FlinkAgentsError, match=r"error-handling-strategy must be one of"):
        load_options(conf_dir=bad)
