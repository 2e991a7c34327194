"""``flink-agents log``: what an action log holds, job by job, and pruning it by hand.

``stats`` lists every job with its records, their size and its newest record; ``prune``
deletes records older than a duration (``--older-than``), or every record of one job
(``--job``), then gives the space back. Jobs prune their own records, and each attempt
expires the jobs no restore can need (``docs/consistency.md``, Retention): ``prune`` is for
what that rule keeps on purpose, such as a pinned job that will not be resubmitted, or a log
written before the rule existed.

The log is found as ``flink-agents history`` finds it: ``--log``, else the ``action-log``
of Flink's ``config.yaml``, else the SQLite file under ``data-dir``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import UTC, datetime
from typing import Any

from flink_agents.api import FlinkAgentsError
from flink_agents.cli._history import _fail, _open, add_log_option
from flink_agents.runtime.action_log import ActionLog, ActionLogError, JobSummary

EPILOG = """\
kind: "generated" for a job whose name was made for its submission (expired by other jobs
once no attempt of it has run or written within its retention window), "pinned" for an
action-log-job name (kept until its own pruning or `log prune`), "unmarked" for a job
written by a version before job markers (kept until `log prune`).
"""

_UNITS_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")


def add_parser(commands: Any) -> None:
    """Add ``log`` to the ``flink-agents`` command."""
    log = commands.add_parser(
        "log",
        help="show what the action log holds per job, or prune it",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = log.add_subparsers(dest="log_command", required=True)
    stats = actions.add_parser("stats", help="size, and records and newest record per job")
    stats.add_argument("--json", action="store_true", help="print JSON instead of a table")
    prune = actions.add_parser(
        "prune",
        help="delete records older than a duration, or a job's, and give the space back",
        description="Delete records, then give their space back (SQLite: the file shrinks; "
        "a file made before job markers is rewritten once). Do not prune below the retention "
        "window of a job that is running: a restore may need its recent records.",
    )
    prune.add_argument(
        "--older-than",
        metavar="DURATION",
        type=duration_ms,
        help="records whose time is older than this, e.g. 90m, 12h, 7d (units ms, s, m, h, d)",
    )
    prune.add_argument("--job", help="only this job's records (all of them, without --older-than)")
    for parser in (stats, prune):
        add_log_option(parser)


def duration_ms(text: str) -> int:
    """``90m`` and the like in milliseconds (argparse's type for ``--older-than``)."""
    match = _DURATION.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"not a duration: {text!r} (a number and a unit: ms, s, m, h or d, e.g. 7d)"
        )
    return round(float(match[1]) * _UNITS_MS[match[2]])


def run(args: Any) -> int:
    """Run ``log stats`` or ``log prune``; 2 when the log cannot be opened or read."""
    if args.log_command == "prune" and args.older_than is None and args.job is None:
        return _fail("log prune needs --older-than, --job, or both")
    try:
        log = _open(args.log)
    except (FlinkAgentsError, ValueError) as error:  # ActionLogError, a bad URL, bad options
        return _fail(str(error))
    try:
        with log:
            if args.log_command == "stats":
                return _stats(log, args.json)
            return _prune(log, args.older_than, args.job)
    except ActionLogError as error:
        return _fail(str(error))
    except Exception as error:  # the driver's, e.g. a dropped connection: passwords redacted
        cause = log.redact(f"{type(error).__name__}: {error}")
        return _fail(f"action log {log.name}: {args.log_command} failed: {cause}")


def _stats(log: ActionLog, as_json: bool) -> int:
    jobs = log.job_summaries()
    size = log.storage_bytes()
    if as_json:
        payload = {"log": log.name, "bytes": size, "jobs": [_job_json(job) for job in jobs]}
        json.dump(payload, sys.stdout, indent=2)
        print()
        return 0
    records = sum(job.records + job.interrupted for job in jobs)
    print(f"{log.name}: {_size(size)}, {records} actions of {len(jobs)} jobs")
    if jobs:
        header = f"{'job':<36} {'kind':<9} {'records':>8} {'unfinished':>10} {'payload':>9}"
        print(f"{header}  newest record")
        for job in sorted(jobs, key=lambda j: j.newest_ms or 0, reverse=True):
            print(
                f"{job.job:<36} {_kind(job):<9} {job.records:>8} {job.interrupted:>10} "
                f"{_size(job.payload_bytes):>9}  {_when(job.newest_ms)}"
            )
    return 0


def _prune(log: ActionLog, older_than_ms: int | None, job: str | None) -> int:
    before = log.storage_bytes()
    cutoff = _now_ms() - older_than_ms if older_than_ms is not None else _EVERYTHING
    jobs = [job] if job is not None else log.jobs()
    removed = sum(log.prune(name, cutoff) for name in jobs)
    log.reclaim_space(full=True)
    after = log.storage_bytes()
    which = f"job {job!r}" if job is not None else f"{len(jobs)} jobs"
    age = "" if older_than_ms is None else f" older than {_duration(older_than_ms)}"
    print(f"pruned {removed} actions{age} of {which} from {log.name}")
    if before is not None and after is not None:
        print(f"size: {_size(before)} -> {_size(after)}")
    return 0


_EVERYTHING = 2**62
"""An epoch above every record's: ``prune`` with it removes all of a job's rows."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _kind(job: JobSummary) -> str:
    if job.marker is None:
        return "unmarked"
    return "generated" if job.marker.generated else "pinned"


def _job_json(job: JobSummary) -> dict[str, Any]:
    return {
        "job": job.job,
        "kind": _kind(job),
        "records": job.records,
        "interrupted": job.interrupted,
        "payload_bytes": job.payload_bytes,
        "newest_ms": job.newest_ms,
        "seen_ms": None if job.marker is None else job.marker.seen_ms,
        "retention_ms": None if job.marker is None else job.marker.retention_ms,
    }


def _when(epoch_ms: int | None) -> str:
    if epoch_ms is None:
        return "-"
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _size(size: int | None) -> str:
    if size is None:
        return "size unknown"
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024  # type: ignore[assignment]
    return f"{size:.1f} GiB"


def _duration(ms: int) -> str:
    for unit in ("d", "h", "m", "s"):
        if ms % _UNITS_MS[unit] == 0:
            return f"{ms // _UNITS_MS[unit]}{unit}"
    return f"{ms}ms"
