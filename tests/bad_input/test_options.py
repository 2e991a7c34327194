"""Bad agent options, in code and in Flink's ``config.yaml``: each is refused before anything
runs, naming the option, the value and where it was set (code, or the file and line)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flink_agents.api import AgentsExecutionEnvironment, FlinkAgentsError
from flink_agents.runtime import AgentOptions, load_options

IN_CODE: dict[str, tuple[dict[str, Any], str]] = {
    "misspelled name": (
        {"num_async_thread": 4},
        "agent option 'num_async_thread' passed in code: unknown option; "
        "did you mean 'num_async_threads'?",
    ),
    "misspelled name, Flink spelling": (
        {"max-in-fligth": 4},
        "agent option 'max-in-fligth' passed in code: unknown option; "
        "did you mean 'max-in-flight'?",
    ),
    "name unlike any option": (
        {"colour": "red"},
        "agent option 'colour' passed in code: unknown option; the options are "
        + ", ".join(sorted(f.alias for f in AgentOptions.model_fields.values())),
    ),
    "negative thread count": (
        {"num_async_threads": -1},
        "agent option 'num_async_threads' passed in code: must be at least 1 (got -1)",
    ),
    "too many threads": (
        {"num_async_threads": 100_000},
        "agent option 'num_async_threads' passed in code: must be at most 4096 (got 100000)",
    ),
    "a boolean for a count": (
        {"num_async_threads": True},
        "agent option 'num_async_threads' passed in code: must be an integer, not a boolean "
        "(got True)",
    ),
    "a fraction for a count": (
        {"max_in_flight": 2.5},
        "agent option 'max_in_flight' passed in code: must be an integer (got 2.5)",
    ),
    "zero max in flight": (
        {"max_in_flight": 0},
        "agent option 'max_in_flight' passed in code: must be at least 1 (got 0)",
    ),
    "unknown error policy": (
        {"error_policy": "ignore"},
        "agent option 'error_policy' passed in code: must be 'fail', 'error-output' or 'retry' "
        "(got 'ignore')",
    ),
    "error policy with an underscore": (
        {"error_policy": "error_output"},
        "agent option 'error_policy' passed in code: must be 'fail', 'error-output' or 'retry' "
        "(got 'error_output'); did you mean 'error-output'?",
    ),
    "zero retry attempts": (
        {"retry_max_attempts": 0},
        "agent option 'retry_max_attempts' passed in code: must be at least 1 (got 0)",
    ),
    "negative backoff": (
        {"retry_initial_backoff_ms": -10},
        "agent option 'retry_initial_backoff_ms' passed in code: must be at least 0 (got -10)",
    ),
    "first backoff above the longest": (
        {"retry_initial_backoff_ms": 20_000},
        "agent option 'retry_initial_backoff_ms' passed in code = 20000 is larger than agent "
        "option 'retry-max-backoff-ms' = 10000 (the default); 'retry-initial-backoff-ms' must "
        "not exceed 'retry-max-backoff-ms'",
    ),
    "poll interval above its maximum": (
        {"async_poll_interval_ms": 100, "async_poll_max_interval_ms": 10},
        "agent option 'async_poll_interval_ms' passed in code = 100 is larger than agent option "
        "'async_poll_max_interval_ms' passed in code = 10; 'async-poll-interval-ms' must not "
        "exceed 'async-poll-max-interval-ms'",
    ),
    "zero step limit": (
        {"max_steps_per_run": 0},
        "agent option 'max_steps_per_run' passed in code: must be at least 1 (got 0)",
    ),
    "not a boolean": (
        {"memory_snapshots": "maybe"},
        "agent option 'memory_snapshots' passed in code: must be true or false (got 'maybe')",
    ),
    "action log with an unknown scheme": (
        {"action_log": "mysql://db/agents"},
        "agent option 'action_log' passed in code: unsupported action log URL: use none, "
        "memory://, sqlite:///path/to/file.db, a file path, or postgresql://... "
        "(got 'mysql://db/agents')",
    ),
}


@pytest.fixture
def no_flink_conf(monkeypatch):
    monkeypatch.delenv("FLINK_CONF_DIR", raising=False)


@pytest.mark.parametrize("case", sorted(IN_CODE))
def test_bad_option_in_code_is_refused_by_the_local_runner(no_flink_conf, case):
    options, expected = IN_CODE[case]
    with pytest.raises(FlinkAgentsError) as caught:
        AgentsExecutionEnvironment.get_execution_environment(**options)
    assert str(caught.value) == expected


def test_a_valid_option_passes(no_flink_conf):
    env = AgentsExecutionEnvironment.get_execution_environment(num_async_threads=4)
    assert env.options.num_async_threads == 4


@pytest.mark.flink
@pytest.mark.parametrize("case", ["misspelled name", "zero max in flight", "unknown error policy"])
def test_bad_option_in_code_is_refused_by_the_flink_runner(no_flink_conf, case):
    from tests.runtime.flink.runners import flink_environment

    options, expected = IN_CODE[case]
    with pytest.raises(FlinkAgentsError) as caught:
        AgentsExecutionEnvironment.get_execution_environment(flink_environment(), **options)
    assert str(caught.value) == expected


# -- config.yaml --------------------------------------------------------------------------

IN_CONFIG: dict[str, tuple[str, str]] = {
    "misspelled name": (
        "taskmanager:\n  numberOfTaskSlots: 2\nagent:\n  error-policy: retry\n"
        "  num-async-thread: 4\n",
        "line 5: agent option 'num-async-thread': unknown option; "
        "did you mean 'num-async-threads'?",
    ),
    "misspelled flat key": (
        "agent.max-in-fligth: 4\n",
        "line 1: agent option 'agent.max-in-fligth': unknown option; did you mean 'max-in-flight'?",
    ),
    "negative thread count": (
        "agent:\n  num-async-threads: -4\n",
        "line 2: agent option 'num-async-threads': must be at least 1 (got -4)",
    ),
    "zero max in flight as a flat key": (
        "agent.max-in-flight: 0\n",
        "line 1: agent option 'agent.max-in-flight': must be at least 1 (got 0)",
    ),
    "misspelled error policy": (
        "agent:\n  error-policy: retyr\n",
        "line 2: agent option 'error-policy': must be 'fail', 'error-output' or 'retry' "
        "(got 'retyr'); did you mean 'retry'?",
    ),
    "yes for a count": (
        "agent:\n  retry-max-attempts: yes\n",
        "line 2: agent option 'retry-max-attempts': must be an integer, not a boolean (got True)",
    ),
    "no value": (
        "agent:\n  max-steps-per-run:\n",
        "line 2: agent option 'max-steps-per-run': must be an integer (got None)",
    ),
}


def write_config(directory: Path, text: str) -> Path:
    path = directory / "config.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("case", sorted(IN_CONFIG))
def test_bad_option_in_config_yaml_names_the_file_and_line(tmp_path, monkeypatch, case):
    text, expected = IN_CONFIG[case]
    config = write_config(tmp_path, text)
    monkeypatch.setenv("FLINK_CONF_DIR", str(tmp_path))
    with pytest.raises(FlinkAgentsError) as caught:
        AgentsExecutionEnvironment.get_execution_environment()
    assert str(caught.value) == f"{config}, {expected}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "agent:\n  - error-policy: retry\n",
            "{config}, line 1: 'agent' must be a mapping of agent options, got list "
            "[{{'error-policy': 'retry'}}]",
        ),
        (
            "agent: retry\n",
            "{config}, line 1: 'agent' must be a mapping of agent options, got str 'retry'",
        ),
        (
            "agent:\n  max-in-flight: [1\n",
            "{config}: invalid YAML at line 3, column 1: expected ',' or ']', but got "
            "'<stream end>'",
        ),
    ],
    ids=["agent is a list", "agent is a string", "invalid YAML"],
)
def test_unusable_config_yaml_names_the_file(tmp_path, text, expected):
    config = write_config(tmp_path, text)
    with pytest.raises(FlinkAgentsError) as caught:
        load_options(conf_dir=str(tmp_path))
    assert str(caught.value) == expected.format(config=config)


def test_code_overrides_a_bad_config_value_and_is_blamed_for_its_own(tmp_path):
    write_config(tmp_path, "agent:\n  max-in-flight: 0\n")
    assert load_options({"max_in_flight": 8}, conf_dir=str(tmp_path)).max_in_flight == 8
    write_config(tmp_path, "agent:\n  max-in-flight: 8\n")
    with pytest.raises(FlinkAgentsError) as caught:
        load_options({"num_async_threads": 0}, conf_dir=str(tmp_path))
    assert str(caught.value) == (
        "agent option 'num_async_threads' passed in code: must be at least 1 (got 0)"
    )


def test_backoffs_out_of_order_across_config_and_code(tmp_path):
    config = write_config(tmp_path, "agent:\n  retry-max-backoff-ms: 50\n")
    with pytest.raises(FlinkAgentsError) as caught:
        load_options({"retry_initial_backoff_ms": 100}, conf_dir=str(tmp_path))
    assert str(caught.value) == (
        "agent option 'retry_initial_backoff_ms' passed in code = 100 is larger than "
        f"{config}, line 2: agent option 'retry-max-backoff-ms' = 50; "
        "'retry-initial-backoff-ms' must not exceed 'retry-max-backoff-ms'"
    )


@pytest.mark.flink
def test_bad_config_yaml_is_refused_by_the_flink_runner(tmp_path, monkeypatch):
    from tests.runtime.flink.runners import flink_environment

    env = flink_environment()  # before FLINK_CONF_DIR changes: the JVM reads it too
    config = write_config(tmp_path, "agent:\n  error-policy: retyr\n")
    monkeypatch.setenv("FLINK_CONF_DIR", str(tmp_path))
    with pytest.raises(FlinkAgentsError) as caught:
        AgentsExecutionEnvironment.get_execution_environment(env)
    assert str(caught.value) == (
        f"{config}, line 2: agent option 'error-policy': must be 'fail', 'error-output' or "
        "'retry' (got 'retyr'); did you mean 'retry'?"
    )
