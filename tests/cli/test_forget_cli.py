"""``flink-agents forget``: a key erased from what a stopped job left, run as users run it
(a fresh interpreter), over SQLite and a real PostgreSQL server."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from flink_agents._ids import key_text
from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.runtime.action_log import open_action_log
from tests.cli.test_history import flink_agents_cli
from tests.runtime.forgetting_agents import Remembers
from tests.runtime.test_forget_key import KEPT, SECRET, by_user, event_lines, records, stored_texts

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite", "postgres"])
def log_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "log.db")
    return request.getfixturevalue("postgres_server").create_database()


def forget_cli(*args: str) -> subprocess.CompletedProcess:
    return flink_agents_cli("forget", *args)


def key_rows(url: str, key: str) -> int:
    with open_action_log(url) as log:
        return sum(
            len(log.key_records(job, key_text(key))) + len(log.key_interrupted(job, key_text(key)))
            for job in log.jobs()
        )


def test_forget_erases_a_key_from_the_log_the_store_and_the_event_log(tmp_path, log_url):
    env = AgentsExecutionEnvironment.get_execution_environment(
        data_dir=str(tmp_path), action_log=log_url, event_log_level="standard"
    )
    requests = [*records("alice", SECRET), *records("bob", KEPT)]
    env.from_list(requests, by_user).apply(Remembers).to_list()
    assert key_rows(log_url, "alice") > 0
    assert SECRET in stored_texts(tmp_path)

    result = forget_cli("--key", "alice", "--log", log_url, "--data-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("erased: ")
    assert "1 long term items, 1 knowledge items" in result.stdout

    assert key_rows(log_url, "alice") == 0
    assert key_rows(log_url, "bob") > 0
    stored = stored_texts(tmp_path)
    assert SECRET not in stored and KEPT in stored
    lines = event_lines(tmp_path)
    assert not [line for line in lines if "alice" in line]
    assert [json.loads(line) for line in lines if KEPT in line]
    if not log_url.startswith("postgresql"):
        raw = b"".join(file.read_bytes() for file in tmp_path.glob("log.db*"))
        assert SECRET.upper().encode() not in raw and KEPT.upper().encode() in raw

    again = forget_cli("--key", "alice", "--log", log_url, "--data-dir", str(tmp_path))
    assert again.returncode == 0
    assert "erased: 0 action log records, 0 long term items, 0 knowledge items, 0 event" in (
        again.stdout
    )


def test_forget_needs_a_key_and_says_when_there_is_nothing(tmp_path):
    assert forget_cli().returncode == 2
    result = forget_cli("--key-json", "42", "--data-dir", str(tmp_path / "nothing"))
    assert result.returncode == 0
    assert "nothing to erase" in result.stderr
    bad = forget_cli("--key-json", "{", "--data-dir", str(tmp_path))
    assert bad.returncode == 2 and "--key-json is not JSON" in bad.stderr
