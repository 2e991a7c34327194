"""Action-log reads on a real job (issue 12): a job that never failed reads nothing from the
log, a restored one replays from it.

The reads are counted by PostgreSQL, outside the Flink Python worker: the job's log database
logs every statement (``log_statement = 'all'``, set on that database only, no restart) and
the test counts them in the server's log. PostgreSQL's statistics views cannot tell reads
from writes here: the log's writes scan the same primary keys (the upsert's conflict check,
deletes and updates by identity), so ``idx_scan`` grows with every write as well.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents.plan import to_plan
from flink_agents.runtime.flink import JobPaths, build_agent_job, read_json_files
from flink_agents.testing.postgres import PostgresServer
from flink_agents.testing.recovery import LedgerAgent, check_recovery, make_records, read_ledger
from tests.recovery.checkpoints import bounded_checkpoints, execute

pytestmark = [pytest.mark.slow, pytest.mark.flink]

RECORDS = make_records(40, 4)
PARALLELISM = 2
FAIL_AFTER_CALLS = [30]  # of the 80 paid calls a run without failure makes

_STATEMENT = re.compile(r"LOG:\s+(?:statement|execute [^:]*):\s*(.*)")


def count_statements(log_text: str) -> Counter[str]:
    """The action-log statements in a server log, by kind: ``index`` (the run index),
    ``lookup`` (a completed record), ``calls`` (an action's recorded calls), ``write``."""
    kinds: Counter[str] = Counter()
    for statement in _STATEMENT.findall(log_text):  # the statement's first line
        if statement.startswith("SELECT run_key, MAX(run_sequence)"):
            kinds["index"] += 1
        elif statement.startswith("SELECT") and "FROM action_log_records" in statement:
            kinds["lookup"] += 1
        elif statement.startswith("SELECT") and "FROM action_log_calls" in statement:
            kinds["calls"] += 1
        elif statement.startswith("INSERT INTO action_log_"):
            kinds["write"] += 1
    return kinds


class StatementLog:
    """A fresh database whose statements the server logs, and what it logged since."""

    def __init__(self, server: PostgresServer) -> None:
        self.url = server.create_database()
        with psycopg.connect(server.url(), autocommit=True) as admin:
            admin.execute(f"ALTER DATABASE {self.url.rsplit('/', 1)[1]} SET log_statement = 'all'")
        assert server.home is not None
        self._file = server.home / "server.log"
        self._start = self._file.stat().st_size

    def counts(self) -> Counter[str]:
        with self._file.open("rb") as log:
            log.seek(self._start)
            return count_statements(log.read().decode(errors="replace"))


def run_job(
    tmp_path: Path, action_log: str, fail_after_calls: list[int], mode: str = "thread"
) -> tuple[list, list]:
    """The ledger agent over ``RECORDS`` in MiniCluster, in PyFlink's ``mode`` (in thread
    mode the runtime context cannot tell the attempt number); returns outputs and ledger.
    A restore in process mode needs paced input (see test_minicluster_failure.py): only
    runs without failure use it here."""
    data = tmp_path / "input.jsonl"
    data.write_text("".join(json.dumps(record) + "\n" for record in RECORDS))
    ledger = tmp_path / "ledger.jsonl"
    config = {"ledger": str(ledger), "delay_s": 0.02, "fail_after_calls": fail_after_calls}
    plan = to_plan(LedgerAgent).model_copy(update={"config": config})
    flink = bounded_checkpoints()
    flink.set_string("restart-strategy.type", "fixed-delay")
    flink.set_string("restart-strategy.fixed-delay.attempts", str(len(fail_after_calls) + 1))
    flink.set_string("restart-strategy.fixed-delay.delay", "100 ms")
    flink.set_string("python.execution-mode", mode)
    env = StreamExecutionEnvironment.get_execution_environment(flink)
    env.set_parallelism(PARALLELISM)
    out = tmp_path / "out"
    paths = JobPaths(data, out / "outputs", out / "errors", None)
    build_agent_job(env, plan, paths, "user", checkpoint_interval_ms=500, action_log=action_log)
    execute(env, "log-reads")
    for threshold in fail_after_calls:  # the failures did happen
        assert (tmp_path / f"failed-after-{threshold}").exists()
    return read_json_files(out / "outputs"), read_ledger(ledger)


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_a_job_that_never_failed_reads_nothing_from_the_log(tmp_path, postgres_server, mode):
    statements = StatementLog(postgres_server)
    outputs, ledger = run_job(tmp_path, statements.url, fail_after_calls=[], mode=mode)
    report = check_recovery(RECORDS, outputs, ledger)
    assert report.ok and report.outputs == len(RECORDS), report

    counts = statements.counts()
    assert counts["write"] >= 2 * len(RECORDS), counts  # the statements were seen
    assert counts["index"] == PARALLELISM, counts  # one per subtask, at open
    assert (counts["lookup"], counts["calls"]) == (0, 0), counts


def test_a_restored_job_replays_from_the_log(tmp_path, postgres_server):
    statements = StatementLog(postgres_server)
    outputs, ledger = run_job(tmp_path, statements.url, FAIL_AFTER_CALLS)
    report = check_recovery(RECORDS, outputs, ledger)
    assert report.ok and report.outputs == len(RECORDS), report
    assert report.repeated_calls == 0  # failures inside actions leave no call unrecorded
    assert len(ledger) == 2 * len(RECORDS)  # no paid call made twice

    counts = statements.counts()
    attempts = 1 + len(FAIL_AFTER_CALLS)
    assert counts["index"] == PARALLELISM * attempts, counts
    assert counts["lookup"] > 0, counts  # the restored attempt looked completed actions up
