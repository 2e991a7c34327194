"""``flink-agents history`` and ``key_history`` over logs written by real local runs, on
SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from flink_agents.runtime import ActionJournal, AgentOptions, LocalRunner
from flink_agents.runtime.action_log import (
    ActionIdentity,
    DurableCall,
    digest_args,
    key_history,
    open_action_log,
)
from tests.cli.history_agents import Crash, HistoryAgent, Idle

ROOT = Path(__file__).resolve().parents[2]
LATENCY = re.compile(r"  \((latency not recorded|\d+\.\d ms)\)$")
"""How the tree ends a call's line (calls are timed or not, depending on the runtime)."""
JOB = "job-h"
NOTE = (
    "The action log records only actions that made a durable call or wrote outside Flink "
    "state (long-term memory, knowledge, external ids), unless the job ran with "
    "action-log-record: all; the others ran but left no record. "
    "Records older than the log's retention window have been pruned."
)


def write_history(url: str, record: str = "restore") -> None:
    """Four runs of the history agent: ``alice`` twice, then a crash in her third run after
    its first durable call; the integer key 7 once (``record``: ``action-log-record``)."""
    journal = ActionJournal(open_action_log(url), JOB)
    options = AgentOptions(action_log_record=record)
    runner = LocalRunner(HistoryAgent, journal=journal, options=options)
    runner.run("alice", {"name": "ann"})
    runner.run("alice", {"name": "ann", "moved": True})
    runner.run(7, {"name": "seven"})
    with pytest.raises(Crash):
        runner.run("alice", {"name": "cy", "crash": True})
    journal.close()  # writes the queued records, as a runner does when an attempt ends


@pytest.fixture(params=["sqlite", "postgres"])
def log_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a log the history agent wrote, of each backend."""
    if request.param == "sqlite":
        url = f"sqlite://{tmp_path / 'logs' / 'action-log.db'}"
    else:
        url = request.getfixturevalue("postgres_server").create_database()
    write_history(url)
    return url


def history_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``flink-agents history ARGS`` in a fresh interpreter (which must import the agent's
    module to read its events)."""
    return flink_agents_cli("history", *args, env=env)


def flink_agents_cli(
    command: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``flink-agents COMMAND ARGS`` in a fresh interpreter that can import the tests'
    agents, without the Flink configuration of this process."""
    environment = {name: v for name, v in os.environ.items() if name != "FLINK_CONF_DIR"}
    environment.update({"PYTHONPATH": str(ROOT), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "flink_agents", command, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment,
        timeout=120,
    )


def call(index: int, function: str, name: str, result: Any = None, error: Any = None) -> dict:
    return {
        "index": index,
        "function": f"tests.cli.history_agents:{function}",
        "args_digest": digest_args((name,), {}),
        "result": result,
        "error": error,
    }


def remembered(step_calls: list[dict], short_term: list[dict], name: str) -> dict:
    return {
        "step": 1,
        "action": "remember",
        "status": "completed",
        "memory": {
            "short_term": short_term,
            "sensory": [  # new in every run: sensory memory is cleared between runs
                {"op": "object", "path": "", "fields": ["found"], "old": None},
                {"op": "set", "path": "found", "value": f"found {name}", "old": None},
            ],
        },
        "events": [{"type": "Noted", "fields": {"text": f"found {name}"}}],
        "calls": step_calls,
    }


ANN_CALLS = [
    call(0, "look_up", "ann", result="found ann"),
    call(1, "refuse", "ann", error="builtins.LookupError: no ann"),
]

ALICE_RUNS = [
    {
        "run_sequence": 1,
        "actions": [
            remembered(
                ANN_CALLS,
                [  # "old": what each path held before (nothing, in the first run)
                    {"op": "object", "path": "", "fields": ["profile"], "old": None},
                    {"op": "object", "path": "profile", "fields": ["name", "city"], "old": None},
                    {"op": "set", "path": "profile.name", "value": "ann", "old": None},
                    {"op": "set", "path": "profile.city", "value": "Lyon", "old": None},
                ],
                "ann",
            )
        ],
    },
    {
        "run_sequence": 2,
        "actions": [
            remembered(
                ANN_CALLS,
                [
                    {"op": "delete", "path": "profile.city", "old": "Lyon"},
                    {
                        "op": "object",
                        "path": "profile",
                        "fields": ["name"],
                        "old": {"fields": ["name", "city"]},
                    },
                ],
                "ann",
            )
        ],
    },
    {
        "run_sequence": 3,
        "actions": [
            {
                "step": 1,
                "action": "remember",
                "status": "interrupted",
                "memory": {"short_term": [], "sensory": []},
                "events": [],
                "calls": [call(0, "look_up", "cy", result="found cy")],
            }
        ],
    },
]


def without_times_and_ids(history: dict) -> dict:
    """``history`` with what differs on every run checked for form and removed: each
    action's time, each event's id, each call's latency (None where calls are not timed)."""
    history = json.loads(json.dumps(history))
    for run in history["runs"]:
        for action in run["actions"]:
            stamp = action.pop("recorded_at")
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp), stamp
            for event in action["events"]:
                uuid.UUID(event.pop("id"))
            for call in action["calls"]:
                latency = call.pop("latency_ms")
                assert latency is None or latency >= 0, latency
    return history


def test_json_history_of_a_key(log_url: str) -> None:
    """--json: every recorded action of each run with its memory changes, events and
    calls; the action that made no durable call (note) is not there; the crashed run shows
    the call it had made."""
    result = history_cli("--job", JOB, "--key", "alice", "--log", log_url, "--json")
    assert result.returncode == 0, result.stderr
    history = without_times_and_ids(json.loads(result.stdout))
    assert history == {
        "log": log_url,
        "job": JOB,
        "key": '"alice"',
        "note": NOTE,
        "runs": ALICE_RUNS,
    }


def test_python_api_gives_what_the_command_prints(log_url: str) -> None:
    with open_action_log(log_url) as log:
        history = key_history(log, JOB, "alice")
        assert [run.run_sequence for run in history.runs] == [1, 2, 3]
        assert history.runs[2].actions[0].completed is False
        printed = history_cli("--job", JOB, "--key", "alice", "--log", log_url, "--json")
        assert json.loads(printed.stdout) == history.to_json()
        seven = without_times_and_ids(key_history(log, JOB, 7).to_json())
        assert seven["runs"][0]["actions"][0]["calls"] == [
            call(0, "look_up", "seven", result="found seven"),
            call(1, "refuse", "seven", error="builtins.LookupError: no seven"),
        ]


def test_tree_in_the_terminal(log_url: str) -> None:
    result = history_cli("--job", JOB, "--key", "alice", "--log", log_url)
    assert result.returncode == 0, result.stderr
    lines = [LATENCY.sub("", line.strip(" │├└─")) for line in result.stdout.splitlines()]
    for expected in [
        "run 1",
        "short-term memory",
        "object profile {name, city}  (new)",
        'set profile.name = "ann"  (new)',
        'delete profile.city  (was "Lyon")',
        'object profile {name}  (was {"fields": ["name", "city"]})',
        "sensory memory",
        'set found = "found ann"  (new)',
        "events sent",
        'Noted {"text": "found ann"}',
        "durable calls",
        '#0 tests.cli.history_agents:look_up -> "found ann"',
        "#1 tests.cli.history_agents:refuse raised builtins.LookupError: no ann",
        "run 3",
        '#0 tests.cli.history_agents:look_up -> "found cy"',
    ]:
        assert expected in lines, (expected, result.stdout)
    calls = [line for line in result.stdout.splitlines() if LATENCY.search(line)]
    assert len(calls) == 5  # each call's line ends with its latency, or says it has none
    steps = [line for line in lines if line.startswith("step ")]
    assert [" ".join(step.split()[:4]) for step in steps] == [
        "step 1 remember completed",
        "step 1 remember completed",
        "step 1 remember interrupted",
    ]
    assert "note" not in " ".join(steps)  # the action without durable calls left no record
    assert "only actions that made a durable call" in result.stdout


def test_keys_that_are_not_strings_are_given_as_json(log_url: str) -> None:
    found = history_cli("--job", JOB, "--key-json", "7", "--log", log_url, "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["key"] == "7"
    as_string = history_cli("--job", JOB, "--key", "7", "--log", log_url)
    assert as_string.returncode == 1
    assert as_string.stdout == ""
    assert 'no records of key "7"' in as_string.stderr
    assert 'the job has records of 2 key(s): "alice", 7' in as_string.stderr


def test_an_unknown_job_lists_the_jobs_of_the_log(log_url: str) -> None:
    result = history_cli("--job", "job-x", "--key", "alice", "--log", log_url, "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["runs"] == []
    assert "no records of job 'job-x'" in result.stderr
    assert "jobs in the log: 'job-h'" in result.stderr
    assert "only actions that made a durable call" in result.stderr


def test_call_latency_is_shown_when_the_log_has_it(tmp_path: Path) -> None:
    """A timed call (stored through the log's interface) shows its latency in both forms."""
    url = str(tmp_path / "timed.db")
    identity = ActionIdentity(JOB, '"bob"', 1, 1, "remember")
    with open_action_log(url) as log:
        timed = DurableCall(0, "tests.cli.history_agents:look_up", "d", "found bob", None, 41.5)
        log.record_call(identity, timed, epoch=1)
        log.record_call(identity, dataclasses.replace(timed, index=1), epoch=1)
    as_json = history_cli("--job", JOB, "--key", "bob", "--log", url, "--json")
    calls = json.loads(as_json.stdout)["runs"][0]["actions"][0]["calls"]
    assert [c["latency_ms"] for c in calls] == [41.5, 41.5]
    tree = history_cli("--job", JOB, "--key", "bob", "--log", url)
    assert '#0 tests.cli.history_agents:look_up -> "found bob"  (41.5 ms)' in tree.stdout


def test_default_log_is_the_sqlite_file_under_the_data_dir(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    write_history(f"sqlite://{data_dir / 'action-log.db'}")
    env = {"FLINK_AGENTS_DATA_DIR": str(data_dir), "FLINK_CONF_DIR": str(tmp_path / "conf")}
    result = history_cli("--job", JOB, "--key", "alice", "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert without_times_and_ids(json.loads(result.stdout))["runs"] == ALICE_RUNS


def test_a_missing_sqlite_file_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "action-log.db"
    result = history_cli("--job", JOB, "--key", "alice", "--log", str(missing))
    assert result.returncode == 2
    assert f"no action log at {missing}" in result.stderr
    assert not missing.parent.exists()


def test_a_password_in_the_log_url_is_never_printed() -> None:
    url = "postgresql://agents:Sup3rSecret@127.0.0.1:1/agents"
    result = history_cli("--job", JOB, "--key", "alice", "--log", url)
    assert result.returncode == 2
    assert "postgresql://agents:***@127.0.0.1:1/agents" in result.stderr
    assert "Sup3rSecret" not in result.stdout + result.stderr
    other = history_cli("--job", JOB, "--key", "a", "--log", "mysql://agents:Sup3rSecret@h/db")
    assert other.returncode == 2
    assert "Sup3rSecret" not in other.stdout + other.stderr


def noted(text: str, old: Any, fields_before: list[str] | None) -> dict:
    """``note``'s record: the one change it makes to short-term memory, nothing else."""
    root = {"op": "object", "path": "", "fields": ["profile", "last_note"]}
    changes = [] if fields_before is None else [{**root, "old": {"fields": fields_before}}]
    return {
        "step": 2,
        "action": "note",
        "status": "completed",
        "memory": {
            "short_term": [
                *changes,
                {"op": "set", "path": "last_note", "value": text, "old": old},
            ],
            "sensory": [],
        },
        "events": [],
        "calls": [],
    }


def test_with_record_all_the_history_shows_every_action_and_its_changes(tmp_path: Path) -> None:
    """``action-log-record: all``: ``note`` (no durable call, a change to short-term memory
    only) is in every completed run, with its change and the value it replaced."""
    url = f"sqlite://{tmp_path / 'all.db'}"
    write_history(url, record="all")
    result = history_cli("--job", JOB, "--key", "alice", "--log", url, "--json")
    assert result.returncode == 0, result.stderr
    runs = without_times_and_ids(json.loads(result.stdout))["runs"]
    first, second, crashed = ALICE_RUNS
    assert runs == [
        {**first, "actions": [*first["actions"], noted("found ann", None, ["profile"])]},
        {**second, "actions": [*second["actions"], noted("found ann", "found ann", None)]},
        crashed,  # its ``remember`` never completed, so ``note`` never ran
    ]

    tree = history_cli("--job", JOB, "--key", "alice", "--log", url)
    assert tree.returncode == 0, tree.stderr
    lines = [LATENCY.sub("", line.strip(" │├└─")) for line in tree.stdout.splitlines()]
    steps = [" ".join(line.split()[:4]) for line in lines if line.startswith("step ")]
    assert steps == [
        "step 1 remember completed",
        "step 2 note completed",
        "step 1 remember completed",
        "step 2 note completed",
        "step 1 remember interrupted",
    ]
    assert 'set last_note = "found ann"  (new)' in lines
    assert 'set last_note = "found ann"  (was "found ann")' in lines


def test_with_record_all_an_action_that_changed_nothing_says_so(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'idle.db'}"
    journal = ActionJournal(open_action_log(url), JOB)
    runner = LocalRunner(Idle, journal=journal, options=AgentOptions(action_log_record="all"))
    runner.run("alice", "x")
    journal.close()
    tree = history_cli("--job", JOB, "--key", "alice", "--log", url)
    assert tree.returncode == 0, tree.stderr
    lines = [line.strip(" │├└─") for line in tree.stdout.splitlines()]
    step = lines.index(next(line for line in lines if line.startswith("step 1 idle")))
    assert lines[step + 1] == "no memory changes, events or calls"
