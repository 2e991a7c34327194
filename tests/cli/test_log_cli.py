"""``flink-agents log stats`` and ``flink-agents log prune`` over logs written by journals,
on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from flink_agents.cli import main
from flink_agents.memory import MemoryDelta
from flink_agents.runtime import ActionJournal
from flink_agents.runtime.action_log import (
    ActionIdentity,
    ActionRecord,
    DurableCall,
    open_action_log,
)

DAY_MS = 86_400_000
GENERATED = "3f0c6a1e9b2d4c7f8e5a1b2c3d4e5f60"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def identity(job: str, step: int) -> ActionIdentity:
    return ActionIdentity(job, '"k"', 1, step, "act")


def write_jobs(url: str, old_ms: int) -> None:
    """A pinned job and a generated one, each with a record at ``old_ms`` and one now; a job
    written as versions before job markers wrote (no marker), with one old record."""
    for job, generated in (("my-agent", False), (GENERATED, True)):
        journal = ActionJournal(open_action_log(url), job, generated_name=generated)
        journal.log.complete(record(job, 0, old_ms, size=30_000))
        journal.log.record_call(identity(job, 1), DurableCall(0, "llm", "d0", "r"), old_ms)
        journal.log.complete(record(job, 2, now_ms()))
        journal.close()
    with open_action_log(url) as log:
        log.complete(record("unmarked", 0, old_ms))


def record(job: str, step: int, epoch: int, size: int = 0) -> ActionRecord:
    memory = MemoryDelta(puts={"note": "x" * size})
    return ActionRecord(identity(job, step), MemoryDelta(), memory, (), (), epoch)


@pytest.fixture(params=["sqlite", "postgres"])
def log_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        url = f"sqlite://{tmp_path / 'action-log.db'}"
    else:
        url = request.getfixturevalue("postgres_server").create_database()
    write_jobs(url, now_ms() - 2 * DAY_MS)
    return url


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["log", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_stats_lists_each_job_with_its_kind_records_size_and_newest_record(
    log_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "stats", "--log", log_url, "--json")
    assert code == 0
    stats = json.loads(out)
    assert stats["bytes"] > 30_000
    jobs = {job["job"]: job for job in stats["jobs"]}
    assert {name: job["kind"] for name, job in jobs.items()} == {
        "my-agent": "pinned",
        GENERATED: "generated",
        "unmarked": "unmarked",
    }
    assert [(jobs["my-agent"][k]) for k in ("records", "interrupted")] == [2, 1]
    assert jobs["my-agent"]["payload_bytes"] > 30_000
    assert jobs["my-agent"]["newest_ms"] > now_ms() - DAY_MS
    assert jobs["unmarked"]["newest_ms"] < now_ms() - DAY_MS
    assert jobs["unmarked"]["seen_ms"] is None
    code, table, _ = cli(capsys, "stats", "--log", log_url)
    assert code == 0
    assert "7 actions of 3 jobs" in table
    lines = {line.split()[0]: line.split()[1:4] for line in table.splitlines()[2:]}
    assert lines == {
        "my-agent": ["pinned", "2", "1"],
        GENERATED: ["generated", "2", "1"],
        "unmarked": ["unmarked", "1", "0"],
    }


def test_prune_older_than_removes_every_jobs_old_records_and_keeps_recent_ones(
    log_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "prune", "--older-than", "1d", "--log", log_url)
    assert code == 0
    assert "pruned 5 actions older than 1d of 3 jobs" in out
    with open_action_log(log_url) as log:
        assert {s.job: (s.records, s.interrupted) for s in log.job_summaries()} == {
            "my-agent": (1, 0),
            GENERATED: (1, 0),
        }
        assert log.completed(identity("my-agent", 2)) is not None


def test_prune_job_removes_all_of_that_job_and_nothing_else(
    log_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "prune", "--job", "my-agent", "--log", log_url)
    assert code == 0
    assert "pruned 3 actions of job 'my-agent'" in out
    with open_action_log(log_url) as log:
        assert log.count("my-agent") == 0
        assert log.count(GENERATED) == 3 and log.count("unmarked") == 1


def test_prune_job_older_than_keeps_that_jobs_recent_records(
    log_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = cli(capsys, "prune", "--job", "my-agent", "--older-than", "36h", "--log", log_url)
    assert code == 0
    with open_action_log(log_url) as log:
        assert log.count("my-agent") == 1 and log.count(GENERATED) == 3


def test_prune_gives_a_sqlite_files_space_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "action-log.db"
    with open_action_log(path) as log:
        for step in range(100):
            log.complete(record("old", step, 0, size=20_000))
    before = path.stat().st_size
    code, out, _ = cli(capsys, "prune", "--older-than", "7d", "--log", str(path))
    assert code == 0
    assert "pruned 100 actions" in out and "size: " in out
    assert path.stat().st_size < before // 10


def test_the_default_log_is_the_sqlite_file_under_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "data"
    write_jobs(f"sqlite://{data_dir / 'action-log.db'}", now_ms())
    monkeypatch.setenv("FLINK_AGENTS_DATA_DIR", str(data_dir))
    monkeypatch.setenv("FLINK_CONF_DIR", str(tmp_path / "conf"))
    code, out, _ = cli(capsys, "stats")
    assert code == 0
    assert out.startswith(f"sqlite://{data_dir.resolve() / 'action-log.db'}: ")


def test_prune_without_a_duration_or_a_job_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "prune", "--log", str(tmp_path / "a.db"))
    assert code == 2
    assert "log prune needs --older-than, --job, or both" in err


def test_a_duration_without_a_unit_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["log", "prune", "--older-than", "7"])
    assert exit_.value.code == 2
    assert "not a duration: '7'" in capsys.readouterr().err


def test_a_missing_sqlite_file_is_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere" / "action-log.db"
    code, _, err = cli(capsys, "stats", "--log", str(missing))
    assert code == 2
    assert f"no action log at {missing}" in err
    assert not missing.parent.exists()


def test_a_password_in_the_log_url_is_never_printed(capsys: pytest.CaptureFixture[str]) -> None:
    url = "postgresql://agents:Sup3rSecret@127.0.0.1:1/agents"
    code, out, err = cli(capsys, "stats", "--log", url)
    assert code == 2
    assert "postgresql://agents:***@127.0.0.1:1/agents" in err
    assert "Sup3rSecret" not in out + err
