"""The soak with failures (``bench.soak --minutes M --fail-every F``, issue 45 goal 6): the
memory agent for M minutes with checkpoints every 10 s and a failure every F minutes;
throughput, memory, state and log sampled throughout, every output checked at the end.

The agent is ``LedgerAgent`` (``flink_agents.testing.recovery``): per record two actions,
one async, each with a durable call that appends a line to a ledger file outside the job,
and short-term memory written with set, new_object and delete. The job is
``jobs/agent_job.py`` on a standalone cluster on loopback (``torture_cluster``: a lost
TaskManager noticed within a second, restarts without limit), the SQLite action log under a
pinned job name, the default thread mode (Python inside the TaskManager's JVM, whose RSS
therefore includes it).

The input goes **as fast as the job takes it**: a file of more records than the job can
take in the time. Throughput is one of the series that must stay flat, and only a job that
is never short of input measures it; at a fixed rate below capacity it would be flat by
construction. At the end the job is stopped with a savepoint and drained (``flink stop
--drain``): the source stops, every record it read is finished and the file sink commits
them. The outputs are then a prefix of the input's ids (one source reads the file in
order), and each id of it must be there exactly once.

Failures alternate (``--failure``): ``kill -9`` of the TaskManager running the job, its
whole process tree, and a new TaskManager started, as ``bench.torture`` does; and an
exception raised by the agent's first action after its durable call (``fail_marker``:
this process creates the file, the next call removes it and fails). Either way the cluster
restarts the job from its last checkpoint. A failure waits until a checkpoint completed
since the previous one, and none is injected in the last minute.

Checks, with ``flink_agents.testing.recovery``'s ``check_recovery``: no output lost or
duplicated; no call executed again after its result reached the log; calls repeated
because a failure came between their side effect and their log write at most one per
failure; each key's memory counted each of its records once (its outputs' ``count``
fields are exactly 1..n).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import astuple, dataclass, fields
from pathlib import Path

from bench._common import table
from bench._probes import (
    checkpoint_stats,
    file_mib,
    open_when_created,
    python_workers,
    records_in,
    rss_mib,
    tree_kib,
    wal_mib,
)
from bench._soak_check import REPEATS_PER_FAILURE, check_outputs
from flink_agents.plan import save_plan, to_plan
from flink_agents.runtime.action_log import ActionLog
from flink_agents.testing import StandaloneCluster
from flink_agents.testing.recovery import LedgerAgent
from flink_agents.testing.torture import (
    TERMINAL,
    cancel_job,
    job_state,
    kill_job_taskmanagers,
    last_checkpoint_ms,
    submit_detached,
    torture_cluster,
)


@dataclass(frozen=True)
class Sample:
    """One row of the series (sizes of the state and the log as they are at that moment)."""

    elapsed_s: float
    load_1m: float
    failures: int
    records_done: int
    """Records whose calls ran (ledger lines / 2): the work done, across restarts."""
    records_per_s: float
    """``records_done`` per second since the previous sample."""
    records_in: int
    """The agent's ``read-records`` metric: since the current attempt started."""
    checkpoints: int
    checkpoint_kib: float
    """The latest completed checkpoint's state size, from the REST API."""
    checkpoint_disk_kib: float
    """The job's checkpoint directory on disk."""
    checkpoint_s: float
    """The latest completed checkpoint's duration."""
    log_rows: int
    log_mib: float
    """The SQLite log's files: database, write-ahead log and index."""
    log_wal_mib: float
    """Its write-ahead log alone (cut back to the log's limit after each checkpoint)."""
    tm_rss_mib: float
    worker_rss_mib: float
    """Python workers outside the JVM: 0 in thread mode (their memory is the JVM's)."""


@dataclass(frozen=True)
class Failure:
    kind: str
    at_s: float
    records_done: int
    recovered_s: float | None = None
    """From the failure to the next completed checkpoint."""


class LedgerLines:
    """The ledger's line count, read incrementally (the file grows to millions of lines)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.lines = path, 0, 0

    def count(self) -> int:
        try:
            with self.path.open("rb") as file:
                file.seek(self.offset)
                chunk = file.read()
        except FileNotFoundError:
            return 0
        complete = chunk.rfind(b"\n") + 1  # a line being written counts once it ends
        self.offset += complete
        self.lines += chunk.count(b"\n", 0, complete)
        return self.lines


def write_input(path: Path, records: int, users: int) -> None:
    """``make_records(records, users)`` as JSON lines, without building the list."""
    with path.open("w") as file:
        for start in range(0, records, 100_000):
            file.write(
                "".join(
                    f'{{"id": {i}, "user": "u{i % users}", "amount": {i % 7 + 1}}}\n'
                    for i in range(start, min(start + 100_000, records))
                )
            )


def run(args: argparse.Namespace, header: str) -> int:
    """The whole soak; 0 when the job ended as it should and every check passed."""
    minutes = args.minutes
    records = args.records or int(args.max_rate * minutes * 60)
    retention = args.retention_ms or 60_000
    with ExitStack() as stack:
        work = args.work or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="soak-")))
        work.mkdir(parents=True, exist_ok=True)
        paths = _Paths(work)
        job_name = f"soak-{int(time.time())}"
        config = {"ledger": str(paths.ledger), "fail_marker": str(paths.marker)}
        plan = save_plan(
            to_plan(LedgerAgent).model_copy(update={"config": config}), work / "plan.json"
        )
        write_input(paths.input, records, args.users)
        cluster = torture_cluster(
            work / "cluster",
            **{
                "metrics.fetcher.update-interval": 2000,
                "execution.checkpointing.dir": f"file://{paths.checkpoints}",
            },
        )
        stack.callback(cluster.stop)
        cluster.start()
        options = {
            "action-log": f"sqlite://{paths.database}",
            "action-log-job": job_name,
            "action-log-retention-ms": retention,
            "error-policy": "fail",
        }
        print(header)
        print(
            f"LedgerAgent, {minutes:g} min, input of {records:,} records over {args.users} "
            f"keys (as fast as the job goes), checkpoints every {args.checkpoint_s:g} s, "
            f"a failure ({args.failure}) every {args.fail_every:g} min, SQLite log with "
            f"retention {retention} ms, job {job_name}, work {work}",
            flush=True,
        )
        job_id = submit_detached(
            cluster,
            [
                "--plan", str(plan), "--input", str(paths.input), "--output", str(paths.out),
                "--key", "user", "--checkpoint-interval-ms", str(int(args.checkpoint_s * 1000)),
                *[a for n, v in options.items() for a in ("--option", f"{n}={v}")],
            ],
        )  # fmt: skip
        log = stack.enter_context(open_when_created(paths.database))
        soak = _Soak(cluster, job_id, job_name, log, paths, args)
        samples, failures = soak.sample_and_fail()
        state = soak.finish()
        return report(samples, failures, state, paths, args)


class _Paths:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.input = work / "input.jsonl"
        self.out = work / "out"
        self.ledger = work / "ledger.jsonl"
        self.marker = work / "fail-now"
        self.checkpoints = work / "checkpoints"
        self.savepoints = work / "savepoints"
        self.database = work / "log" / "action-log.db"
        self.database.parent.mkdir(exist_ok=True)


class _Soak:
    """The sampling and failure loop of one submitted job, and its end."""

    def __init__(
        self,
        cluster: StandaloneCluster,
        job_id: str,
        job_name: str,
        log: ActionLog,
        paths: _Paths,
        args: argparse.Namespace,
    ) -> None:
        self.cluster, self.job_id, self.job_name, self.log = cluster, job_id, job_name, log
        self.paths, self.args = paths, args
        self.ledger = LedgerLines(paths.ledger)
        self.started = time.monotonic()
        self.stopping = False

    def sample_and_fail(self) -> tuple[list[Sample], list[Failure]]:
        """Sample every ``interval`` seconds for ``minutes``; inject the failures that are
        due. Stops early if the job ends (its input exhausted, or failed)."""
        args = self.args
        duration = args.minutes * 60
        due = failure_times(args)
        samples: list[Sample] = []
        failures: list[Failure] = []
        failed_ms = 0
        print(table([f.name for f in fields(Sample)], []), flush=True)
        while (elapsed := time.monotonic() - self.started) < duration:
            sample = self.sample(samples[-1] if samples else None, len(failures))
            samples.append(sample)
            print("  ".join(str(v) for v in astuple(sample)), flush=True)
            if failures and failures[-1].recovered_s is None:
                completed = last_checkpoint_ms(self.cluster, self.job_id)
                if completed > failed_ms:
                    failures[-1] = _recovered(failures[-1], (completed - failed_ms) / 1000)
            if due and elapsed >= due[0] and (not failures or failures[-1].recovered_s):
                due.pop(0)
                kind = self._kind(len(failures))
                failed_ms = time.time_ns() // 1_000_000
                self.fail(kind)
                failures.append(Failure(kind, round(elapsed, 1), sample.records_done))
                print(f"failure {len(failures)}: {kind} at {elapsed:.0f} s", flush=True)
            if job_state(self.cluster, self.job_id) in TERMINAL:
                break
            time.sleep(max(0.0, args.interval - (time.monotonic() - self.started - elapsed)))
        return samples, failures

    def sample(self, previous: Sample | None, failures: int) -> Sample:
        taskmanagers = self.cluster.taskmanager_pids()
        workers = [w for tm in taskmanagers for w in python_workers(tm)]
        elapsed = time.monotonic() - self.started
        done = self.ledger.count() // 2
        rate = 0.0
        if previous is not None and elapsed > previous.elapsed_s:
            rate = (done - previous.records_done) / (elapsed - previous.elapsed_s)
        stats = checkpoint_stats(self.cluster, self.job_id)
        latest = (stats.get("latest") or {}).get("completed") or {}
        return Sample(
            elapsed_s=round(elapsed, 1),
            load_1m=os.getloadavg()[0],
            failures=failures,
            records_done=done,
            records_per_s=round(rate, 1),
            records_in=records_in(self.cluster, self.job_id),
            checkpoints=int((stats.get("counts") or {}).get("completed") or 0),
            checkpoint_kib=round(int(latest.get("state_size") or 0) / 1024, 1),
            checkpoint_disk_kib=round(tree_kib(self.paths.checkpoints / self.job_id), 1),
            checkpoint_s=round(int(latest.get("end_to_end_duration") or 0) / 1000, 2),
            log_rows=self.log.count(self.job_name),
            log_mib=round(file_mib(self.paths.database), 2),
            log_wal_mib=round(wal_mib(self.paths.database), 2),
            tm_rss_mib=round(sum(rss_mib(p) for p in taskmanagers), 1),
            worker_rss_mib=round(sum(rss_mib(p) for p in workers), 1),
        )

    def _kind(self, number: int) -> str:
        if self.args.failure == "alternate":
            return ("kill", "exception")[number % 2]
        return self.args.failure

    def fail(self, kind: str) -> None:
        if kind == "exception":
            self.paths.marker.touch()  # the agent's next call removes it and fails
            return
        pids = kill_job_taskmanagers(self.cluster, self.job_id)
        if not pids:
            raise RuntimeError(f"no living TaskManager runs job {self.job_id}")
        for _ in pids:
            self.cluster.start_taskmanager()

    def finish(self, timeout: float = 600) -> str:
        """Stop the job with a drain once it runs with a checkpoint since its last restart
        (the job may have ended already: its input exhausted); its final state."""
        state = job_state(self.cluster, self.job_id)
        if state in TERMINAL:
            return state
        deadline = time.monotonic() + timeout
        since = time.time_ns() // 1_000_000
        while last_checkpoint_ms(self.cluster, self.job_id) <= since:
            if time.monotonic() > deadline:
                return cancel_job(self.cluster, self.job_id)
            time.sleep(1)
        print("stopping with a savepoint and a drain", flush=True)
        location = stop_with_drain(self.cluster, self.job_id, self.paths.savepoints, timeout)
        print(f"savepoint: {location}", flush=True)
        state = job_state(self.cluster, self.job_id)
        while state not in TERMINAL and time.monotonic() < deadline:
            time.sleep(1)
            state = job_state(self.cluster, self.job_id)
        return state if state in TERMINAL else cancel_job(self.cluster, self.job_id)


def stop_with_drain(
    cluster: StandaloneCluster, job_id: str, target: Path, timeout: float = 600
) -> str:
    """``flink stop --drain``: a final savepoint after the sources ended and the operators
    finished what they hold; the savepoint's location, or why it failed."""
    body = json.dumps({"drain": True, "targetDirectory": f"file://{target}"}).encode()
    request = urllib.request.Request(
        f"{cluster.rest_url}/jobs/{job_id}/stop",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        trigger = json.loads(response.read())["request-id"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = cluster.rest(f"/jobs/{job_id}/savepoints/{trigger}")
        if status["status"]["id"] == "COMPLETED":
            operation = status.get("operation") or {}
            return operation.get("location") or f"failed: {operation.get('failure-cause')}"
        time.sleep(1)
    return "timed out"


def quarters(
    samples: Sequence[Sample], failures: Sequence[Failure], settle_s: float
) -> list[list[Sample]]:
    """The samples of each quarter of the run, without those within ``settle_s`` after a
    failure (a restart's catch-up, a new TaskManager's warm-up)."""
    if not samples:
        return [[], [], [], []]
    end = samples[-1].elapsed_s

    def settled(sample: Sample) -> bool:
        return not any(0 <= sample.elapsed_s - f.at_s < settle_s for f in failures)

    kept = [s for s in samples if settled(s) and s.elapsed_s > 0]
    return [[s for s in kept if min(int(4 * s.elapsed_s / end), 3) == q] for q in range(4)]


SERIES: tuple[tuple[str, Callable[[Sample], float]], ...] = (
    ("records/s", lambda s: s.records_per_s),
    ("TaskManager RSS MiB", lambda s: s.tm_rss_mib),
    ("Python worker RSS MiB", lambda s: s.worker_rss_mib),
    ("checkpoint KiB (REST)", lambda s: s.checkpoint_kib),
    ("checkpoint KiB (disk)", lambda s: s.checkpoint_disk_kib),
    ("checkpoint duration s", lambda s: s.checkpoint_s),
    ("log rows", lambda s: s.log_rows),
    ("log MiB (db+wal+shm)", lambda s: s.log_mib),
    ("log's -wal MiB", lambda s: s.log_wal_mib),
    ("load average, 1 min", lambda s: s.load_1m),  # not ours: what the rate ran against
)


def flatness(parts: Sequence[Sequence[Sample]], tolerance: float = 0.1) -> list[tuple[object, ...]]:
    """Per series: each quarter's median (the mean for the rate), the last quarter's over
    the first's, and flat when that is within ``tolerance`` of 1."""
    rows: list[tuple[object, ...]] = []
    for name, value in SERIES:
        average = statistics.mean if name == "records/s" else statistics.median
        values = [average([value(s) for s in part]) if part else 0.0 for part in parts]
        first, last = values[0], values[-1]
        if not first and not last:
            rows.append((name, *values, "-", "(none)"))
            continue
        ratio = last / first if first else float("inf")
        verdict = "flat" if abs(ratio - 1) <= tolerance else ("grows" if ratio > 1 else "falls")
        rows.append((name, *(round(v, 2) for v in values), f"{ratio:.3f}", verdict))
    return rows


def report(
    samples: list[Sample],
    failures: list[Failure],
    state: str,
    paths: _Paths,
    args: argparse.Namespace,
) -> int:
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    with args.csv.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow([f.name for f in fields(Sample)])
        writer.writerows(astuple(s) for s in samples)
    print(f"\njob {state}; {len(samples)} samples written to {args.csv}")
    print(table(("failure", "kind", "at s", "records done", "to next checkpoint s"), [
        (n, f.kind, f.at_s, f.records_done, f.recovered_s if f.recovered_s else "-")
        for n, f in enumerate(failures, 1)
    ]))  # fmt: skip
    parts = quarters(samples, failures, args.settle_s)
    print(
        f"\nper quarter of the run ({', '.join(str(len(p)) for p in parts)} samples; those "
        f"within {args.settle_s:g} s after a failure left out); flat: the last quarter "
        "within 10% of the first"
    )
    print(table(("series", "Q1", "Q2", "Q3", "Q4", "Q4/Q1", ""), flatness(parts)))
    loads = [s.load_1m for s in samples]
    if loads:
        print(f"load average (1 min) during the run: {min(loads):.2f} to {max(loads):.2f}, "
              f"median {statistics.median(loads):.2f}")  # fmt: skip
    outcome = check_outputs(paths.out, paths.ledger, args.users, paths.work / "check")
    recovery = outcome.recovery
    print(
        f"\nrecords read {outcome.read:,}, outputs {recovery.outputs:,}: lost "
        f"{recovery.lost}, duplicated {recovery.duplicated}; calls run again after their "
        f"result was recorded {recovery.reexecuted_after_record}; calls repeated because a "
        f"failure came before their result was recorded {recovery.repeated_calls} (at most "
        f"{REPEATS_PER_FAILURE} a failure); keys whose memory miscounted "
        f"{outcome.memory_miscounted}; calls for ids without an output "
        f"{outcome.calls_without_output}; error records {outcome.errors}"
    )
    ok = state == "FINISHED" and len(failures) >= len(failure_times(args))
    ok = ok and outcome.ok(len(failures))
    print(
        f"every output exactly once: {'yes' if outcome.exactly_once else 'NO'}; "
        f"soak {'ok' if ok else 'FAILED'}"
    )
    return 0 if ok else 1


def failure_times(args: argparse.Namespace) -> list[float]:
    """When failures are due, in seconds from submission: every ``fail_every`` minutes,
    none in the last minute (the job stops with a checkpoint since its last restart)."""
    if not args.fail_every:
        return []
    every, end = args.fail_every * 60, args.minutes * 60 - 60
    return [n * every for n in range(1, int(end // every) + 1)]


def _recovered(failure: Failure, seconds: float) -> Failure:
    return Failure(failure.kind, failure.at_s, failure.records_done, round(seconds, 1))
