"""Soak: many records through an agent with the SQLite action log and a short retention; the
log must stay bounded while records flow, and so must the processes' memory.

The job is ``jobs/agent_job.py`` on a standalone cluster on loopback (one TaskManager, so the
JVM and the Python worker are separate processes to measure), with checkpoints every second
and a short ``action-log-retention-ms``. The agent is ``SoakAgent`` (one synchronous action:
a durable call, a memory update and an output per record, the cheapest path through the
log) or, with ``--agent ledger``, ``LedgerAgent`` (two actions, one async, two durable calls
per record appended to a ledger file; about half as fast). The job's name in the log is
pinned (``action-log-job``) so that this process can count its rows. Every few seconds it
samples the records the agent took in (Flink's metric, refreshed every 2 s), the log's rows
(``ActionLog.count``), the SQLite file's size with its ``-wal`` and ``-shm``, and the
resident memory (VmRSS) of the TaskManager and of its Python worker; the series is printed
and written to ``bench/out/soak.csv``.

    PYTHONPATH=$PWD .venv/bin/python -m bench.soak --records 200000

With ``--minutes M`` it is the soak with failures instead (``bench/_soak_failures.py``,
issue 45 goal 6): ``LedgerAgent`` for M minutes, input as fast as the job goes, checkpoints
every 10 s, a failure every ``--fail-every`` minutes (``kill -9`` of the TaskManager and an
exception in the agent, alternately), throughput, RSS, checkpoint size and the log sampled,
each series' first and last quarters compared, and every output checked exactly once once
the job is stopped with a drain.

    PYTHONPATH=$PWD .venv/bin/python -m bench.soak --minutes 120 --fail-every 15
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import astuple, dataclass, fields
from pathlib import Path

from bench._common import machine_summary, table
from bench._probes import file_mib, open_when_created, python_workers, records_in, rss_mib
from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.plan import AgentPlan, save_plan, to_plan
from flink_agents.runtime.action_log import ActionLog
from flink_agents.testing import StandaloneCluster
from flink_agents.testing.recovery import LedgerAgent, make_records
from flink_agents.testing.torture import (
    TERMINAL,
    cancel_job,
    job_state,
    submit_detached,
    torture_cluster,
)

OUT = Path(__file__).resolve().parent / "out" / "soak.csv"


def echo(value: int) -> int:
    """The durable call: as cheap as a call can be, so the log's costs dominate."""
    return value


class SoakAgent(Agent):
    """One synchronous action per record: a durable call, a memory update, an output."""

    @action(InputEvent)
    def handle(event: InputEvent, ctx: RunnerContext) -> None:
        record = event.input
        echoed = ctx.durable_execute(echo, record["id"])
        count = (ctx.short_term_memory.get("count") or 0) + 1
        ctx.short_term_memory.set("count", count)
        ctx.send_event(OutputEvent(output={"id": echoed, "count": count}))


def soak_plan(agent: str, work: Path) -> AgentPlan:
    """The plan, compiled from ``bench.soak`` by name (not ``__main__``): the Python
    worker imports the actions by the module recorded in the plan."""
    if agent == "ledger":
        config = {"ledger": str(work / "ledger.jsonl")}
        return to_plan(LedgerAgent).model_copy(update={"config": config})
    from bench import soak

    return to_plan(soak.SoakAgent)


@dataclass(frozen=True)
class Sample:
    elapsed_s: float
    records_in: int
    log_rows: int
    log_mib: float
    tm_rss_mib: float
    worker_rss_mib: float


def write_input(work: Path, records: int, users: int) -> Path:
    data = work / "input.jsonl"
    with data.open("w") as file:
        for record in make_records(records, users):
            file.write(json.dumps(record) + "\n")
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--records",
        type=int,
        default=None,
        help="default: 200,000; with --minutes, --max-rate records a second for the whole time",
    )
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--agent", choices=("simple", "ledger"), default="simple")
    parser.add_argument(
        "--retention-ms",
        type=int,
        default=None,
        help="the log's window (default: 5,000; 60,000 with --minutes)",
    )
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--work", type=Path, default=None, help="keep files here (default: tmp)")
    parser.add_argument("--csv", type=Path, default=OUT)
    failures = parser.add_argument_group("the soak with failures (LedgerAgent)")
    failures.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="run this long, with failures (the mode's switch)",
    )
    failures.add_argument(
        "--fail-every", type=float, default=15.0, help="minutes between failures (0: none)"
    )
    failures.add_argument(
        "--failure", choices=("alternate", "kill", "exception"), default="alternate"
    )
    failures.add_argument("--checkpoint-s", type=float, default=10.0)
    failures.add_argument(
        "--max-rate",
        type=float,
        default=2500.0,
        help="records/s the input is sized for (more than the job takes)",
    )
    failures.add_argument(
        "--settle-s",
        type=float,
        default=60.0,
        help="seconds after a failure left out of the comparison",
    )
    args = parser.parse_args(argv)  # fmt: skip
    if args.minutes:
        from bench import _soak_failures

        return _soak_failures.run(args, machine_summary())
    args.records = args.records or 200_000
    args.retention_ms = args.retention_ms or 5000
    print(machine_summary())
    with ExitStack() as stack:
        work = args.work or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        work.mkdir(parents=True, exist_ok=True)
        database = work / "log" / "action-log.db"
        database.parent.mkdir(exist_ok=True)
        job_name = f"soak-{int(time.time())}"
        plan = save_plan(soak_plan(args.agent, work), work / "plan.json")
        data = write_input(work, args.records, args.users)
        cluster = torture_cluster(work / "cluster", **{"metrics.fetcher.update-interval": 2000})
        stack.callback(cluster.stop)
        cluster.start()
        options = {
            "action-log": f"sqlite://{database}",
            "action-log-job": job_name,
            "action-log-retention-ms": args.retention_ms,
            "error-policy": "fail",
        }
        print(
            f"{args.records:,} records over {args.users} keys, agent {args.agent}, checkpoints "
            f"every 1 s, retention {args.retention_ms} ms, job {job_name}",
            flush=True,
        )
        started = time.monotonic()
        job_id = submit_detached(
            cluster,
            [
                "--plan", str(plan), "--input", str(data), "--output", str(work / "out"),
                "--key", "user", "--checkpoint-interval-ms", "1000",
                *[a for n, v in options.items() for a in ("--option", f"{n}={v}")],
            ],
        )  # fmt: skip
        log = stack.enter_context(open_when_created(database))
        samples = sample_until_done(cluster, job_id, job_name, log, database, args)
        state = job_state(cluster, job_id)
        if state not in TERMINAL:
            state = cancel_job(cluster, job_id)
        report(samples, state, time.monotonic() - started, args)
    return 0 if state == "FINISHED" else 1


def sample_until_done(
    cluster: StandaloneCluster,
    job_id: str,
    job_name: str,
    log: ActionLog,
    database: Path,
    args: argparse.Namespace,
) -> list[Sample]:
    """Samples every ``args.interval`` seconds until the job ends (or the timeout)."""
    samples: list[Sample] = []
    started = time.monotonic()
    print(table([f.name for f in fields(Sample)], []), flush=True)
    while time.monotonic() - started < args.timeout:
        taskmanagers = cluster.taskmanager_pids()
        workers = [w for tm in taskmanagers for w in python_workers(tm)]
        sample = Sample(
            elapsed_s=round(time.monotonic() - started, 1),
            records_in=records_in(cluster, job_id),
            log_rows=log.count(job_name),
            log_mib=round(file_mib(database), 2),
            tm_rss_mib=round(sum(rss_mib(p) for p in taskmanagers), 1),
            worker_rss_mib=round(sum(rss_mib(p) for p in workers), 1),
        )
        samples.append(sample)
        print("  ".join(str(v) for v in astuple(sample)), flush=True)
        if job_state(cluster, job_id) in TERMINAL:
            break
        time.sleep(args.interval)
    return samples


def report(samples: list[Sample], state: str, elapsed: float, args: argparse.Namespace) -> None:
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    with args.csv.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow([f.name for f in fields(Sample)])
        writer.writerows(astuple(s) for s in samples)
    flowing = [s for s in samples if 0 < s.records_in < args.records]
    print(f"\njob {state} in {elapsed:.0f} s; series written to {args.csv}")
    if not flowing:
        return
    half = flowing[len(flowing) // 2 :]
    rows = []
    for name, values in (
        ("log rows", [s.log_rows for s in flowing]),
        ("log MiB (db+wal+shm)", [s.log_mib for s in flowing]),
        ("TaskManager RSS MiB", [s.tm_rss_mib for s in flowing]),
        ("Python worker RSS MiB", [s.worker_rss_mib for s in flowing if s.worker_rss_mib]),
    ):
        middle = len(values) // 2
        rows.append((name, max(values[:middle] or values), max(values[middle:]), values[-1]))
    print(table(("while records flow", "max, 1st half", "max, 2nd half", "last"), rows))
    rate = (half[-1].records_in - half[0].records_in) / max(
        half[-1].elapsed_s - half[0].elapsed_s, 1
    )
    print(f"records/s over the second half: {rate:,.0f}")


if __name__ == "__main__":
    sys.exit(main())
