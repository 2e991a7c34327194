"""Torture: ``kill -9`` the TaskManager of a running agent job, again and again, and check
what recovery made of it, round after round.

Each round runs the scenario of ``tests/recovery/test_cluster_kill.py``
(``flink_agents.testing.torture``) on one standalone cluster on loopback: the two-action
``LedgerAgent`` (its durable calls append to a ledger file outside the job) over R records,
K kills of the TaskManager running it (JVM and Python worker) mid-stream, a new TaskManager
after each, the action log in SQLite (a file every TaskManager of this machine shares) or
PostgreSQL (a real server started from the machine's binaries), a fresh log per round.

    PYTHONPATH=$PWD .venv/bin/python -m bench.torture --rounds 3 --kills 3 --records 400

Columns: outputs lost / duplicated in the exactly-once file sink; repeated calls (a call
interrupted by a kill between its side effect and its log write, so executed again: at most
one per kill); calls re-executed after their result was recorded (must be 0); whether the
final short-term memory equals that of a run without failure; mean seconds from a kill to
the next completed checkpoint.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from bench._common import machine_summary, table
from flink_agents.testing.postgres import PostgresServer, find_postgres_bindir
from flink_agents.testing.torture import TortureResult, TortureSpec, run_torture, torture_cluster

HEADERS = (
    "round", "kills", "recovered", "lost", "duplicated", "repeated calls",
    "re-executed after record", "memory equal", "recovery s", "elapsed s",
)  # fmt: skip


def row(number: int, result: TortureResult) -> tuple[object, ...]:
    report = result.report
    recoveries = [k.recovered_s for k in result.kills if k.recovered_s is not None]
    return (
        number,
        len(result.kills),
        "yes" if result.finished else f"no ({result.state})",
        report.lost,
        report.duplicated,
        report.repeated_calls,
        report.reexecuted_after_record,
        "yes" if result.memory_equal else "no",
        statistics.mean(recoveries) if recoveries else "-",
        result.elapsed_s,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--records", type=int, default=400)
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--delay", type=float, default=0.05, help="first call's latency, s")
    parser.add_argument("--log", choices=("sqlite", "postgres"), default="postgres")
    parser.add_argument("--spares", type=int, default=0, help="idle TaskManagers kept ready")
    parser.add_argument("--work", type=Path, default=None, help="keep files here (default: tmp)")
    parser.add_argument("--verbose", action="store_true", help="print each kill")
    args = parser.parse_args(argv)
    spec = TortureSpec(
        records=args.records,
        users=args.users,
        kills=args.kills,
        delay_s=args.delay,
        spares=args.spares,
    )
    print(machine_summary())
    print(f"{spec}, action log: {args.log}\n", flush=True)
    with ExitStack() as stack:
        work = args.work or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        server = None
        if args.log == "postgres":
            if find_postgres_bindir() is None:
                print("no PostgreSQL server binaries: use --log sqlite", file=sys.stderr)
                return 2
            server = stack.enter_context(PostgresServer())
        cluster = torture_cluster(work / "cluster")
        stack.callback(cluster.stop)
        cluster.start()
        rows, failures = [], 0
        for number in range(1, args.rounds + 1):
            round_dir = work / f"round-{number}"
            round_dir.mkdir(parents=True, exist_ok=True)
            log = server.create_database() if server else f"sqlite://{round_dir / 'log.db'}"
            started = time.monotonic()
            result = run_torture(cluster, round_dir, log, spec, print if args.verbose else _quiet)
            rows.append(row(number, result))
            failures += not result.ok
            print(f"round {number}: {'ok' if result.ok else 'FAILED'} "
                  f"({time.monotonic() - started:.0f} s)", flush=True)  # fmt: skip
        print()
        print(table(HEADERS, rows))
        if failures:
            where = cluster.log_dir if args.work else "rerun with --work DIR to keep them"
            print(f"\n{failures} round(s) failed; cluster logs: {where}")
    return 1 if failures else 0


def _quiet(message: str) -> None:
    pass


if __name__ == "__main__":
    sys.exit(main())
