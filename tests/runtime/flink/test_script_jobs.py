"""One-file jobs, run the way users run them: ``python my_job.py`` in a fresh process, the
agent, its events, tool and resource provider defined in the script itself."""

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from flink_agents.api import Agent, Event, InputEvent, OutputEvent, action
from flink_agents.plan import compile_agent
from flink_agents.runtime.flink._script import ScriptCode
from flink_agents.testing import clean_environment

SCRIPTS = Path(__file__).parent / "scripts"
VENV_BIN = str(Path(sys.executable).parent)

EXPECTED = [
    {"letters": 7, "seen": 1, "text": "HELLO, BO"},
    {"letters": 8, "seen": 1, "text": "HELLO, ANA"},
    {"letters": 8, "seen": 2, "text": "HELLO, ANA"},
]


def user_environment(activated: bool) -> dict[str, str]:
    """A user's shell: no PYTHONPATH, and the venv's ``bin`` on ``PATH`` only if activated."""
    env = clean_environment()
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != VENV_BIN]
    env["PATH"] = os.pathsep.join([VENV_BIN, *path] if activated else path)
    if activated:
        env["VIRTUAL_ENV"] = str(Path(VENV_BIN).parent)
    return env


def run_script(script: Path, *args: str, cwd: Path, activated: bool):
    python = "python" if activated else sys.executable  # `.venv/bin/python my_job.py`
    return subprocess.run(
        [python, str(script), *args],
        cwd=cwd,
        env=user_environment(activated),
        capture_output=True,
        text=True,
        timeout=600,
    )


def outputs(file: Path) -> list[dict]:
    return [json.loads(line) for line in file.read_text().splitlines()]


@pytest.mark.flink
@pytest.mark.parametrize(
    ("mode", "activated", "extra"),
    [
        ("default", False, ()),  # thread mode, chosen by the agents environment
        ("process", True, ()),
        ("thread", True, ("--plan",)),  # the plan compiled from the script's agent
    ],
    ids=["default-mode-unactivated-venv", "process-mode", "thread-mode-compiled-plan"],
)
def test_an_agent_defined_in_the_job_script_runs_in_minicluster(tmp_path, mode, activated, extra):
    out = tmp_path / "outputs.jsonl"
    result = run_script(
        SCRIPTS / "one_file_job.py", mode, str(out), *extra, cwd=tmp_path, activated=activated
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert outputs(out) == EXPECTED


UNSHIPPABLE = """
    import threading

    from pyflink.datastream import StreamExecutionEnvironment

    from flink_agents.api import Agent, AgentsExecutionEnvironment, InputEvent, OutputEvent, action


    class Locked(Agent):
        guard = threading.Lock()

        @action(InputEvent)
        @staticmethod
        def echo(event, ctx):
            with Locked.guard:
                ctx.send_event(OutputEvent(output=event.input))


    env = StreamExecutionEnvironment.get_execution_environment()
    agents = AgentsExecutionEnvironment.get_execution_environment(env)
    builder = agents.from_datastream(env.from_collection(["a"]))
    try:
        builder.apply(Locked)
    except Exception as error:
        print(type(error).__name__, error)
    else:
        print("applied")
"""


@pytest.mark.flink
def test_a_script_agent_that_cannot_be_shipped_fails_at_apply_saying_what_to_do(tmp_path):
    script = tmp_path / "my_job.py"
    script.write_text(textwrap.dedent(UNSHIPPABLE))
    result = run_script(script, cwd=tmp_path, activated=True)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.startswith("FlinkAgentsError cannot ship 'Locked', defined in the job")
    assert "Move it into a module of its own" in result.stdout


@pytest.mark.flink
def test_a_job_gets_this_interpreter_and_its_import_path_unless_it_chose_its_own():
    from pyflink.datastream import StreamExecutionEnvironment

    import flink_agents
    from flink_agents.runtime.flink._environment import (
        FlinkExecutionEnvironment,
        _python_config,
    )

    env = StreamExecutionEnvironment.get_execution_environment()
    FlinkExecutionEnvironment(env)
    config = _python_config(env)
    assert config.getString("python.executable", None) == sys.executable
    assert config.getString("python.execution-mode", None) == "thread"
    path = config.getString("python.pythonpath", "").split(os.pathsep)
    # Our package's root is on it, however it was installed (an editable install's finder).
    assert str(Path(flink_agents.__file__).parents[1]) in path

    chosen = StreamExecutionEnvironment.get_execution_environment()
    config = _python_config(chosen)
    config.setString("python.executable", "/opt/python/bin/python3")
    config.setString("python.pythonpath", "/opt/site-packages")
    FlinkExecutionEnvironment(chosen)
    assert config.getString("python.executable", None) == "/opt/python/bin/python3"
    assert config.getString("python.pythonpath", None) == "/opt/site-packages"


# --- ScriptCode in one process: what a worker's __main__ gets ---------------------------


class Pinged(Event):
    n: int


class Pinger(Agent):
    @action(InputEvent)
    @staticmethod
    def ping(event, ctx):
        ctx.send_event(OutputEvent(output=event.input))


@pytest.fixture
def script_main(monkeypatch):
    """A stand-in ``__main__`` holding ``Pinger`` and ``Pinged`` as a script would."""
    main = types.ModuleType("__main__")
    for defined in (Pinger, Pinger.ping, Pinged):
        monkeypatch.setattr(defined, "__module__", "__main__")
    main.Pinger, main.Pinged = Pinger, Pinged
    monkeypatch.setitem(sys.modules, "__main__", main)
    return main


def test_a_plan_naming_nothing_in_the_script_ships_nothing():
    assert ScriptCode.of(compile_agent(Pinger)) is None


def test_script_code_defines_the_plan_names_and_the_script_classes_in_a_bare_main(
    script_main, monkeypatch
):
    code = ScriptCode.of(compile_agent(Pinger))
    assert code is not None and code.names == ("Pinger",)
    worker_main = types.ModuleType("__main__")  # a worker's: nothing of the script
    monkeypatch.setitem(sys.modules, "__main__", worker_main)
    code.install()
    assert {"Pinger", "Pinged"} <= set(vars(worker_main))
    assert worker_main.Pinged(n=1).n == 1
    code.install()  # a second operator of the job, or a restart: the same names again
    assert worker_main.__flink_agents_shipped__ == {"Pinger", "Pinged"}


def test_script_code_leaves_a_name_the_worker_main_already_has(script_main):
    code = ScriptCode.of(compile_agent(Pinger))
    own = object()
    script_main.Pinger = own  # a local process-mode worker: __main__ is the script itself
    code.install()
    assert script_main.Pinger is own
