"""Real failures under a running agent job: ``kill -9`` of TaskManagers on a standalone cluster.

The MiniCluster recovery test fails the job from inside an action; that never interrupts a
durable call, the Python worker or the action log's connection. Here the TaskManager JVM and
its Python worker die at an arbitrary instant (as when a container is OOM-killed), a new
TaskManager is started, and the job must recover from its last checkpoint with the shared
action log. ``tests/recovery/test_cluster_kill.py`` and ``bench/torture.py`` both call
``run_torture``; the checks are those of ``flink_agents.testing.recovery``.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flink_agents.plan import save_plan, to_plan
from flink_agents.runtime.flink import read_json_files
from flink_agents.testing._cluster import StandaloneCluster
from flink_agents.testing.recovery import (
    LedgerAgent,
    RecoveryReport,
    check_recovery,
    expected_memory,
    make_records,
    read_ledger,
)

REPO = Path(__file__).resolve().parents[2]
AGENT_JOB = REPO / "jobs" / "agent_job.py"
TERMINAL = ("FINISHED", "FAILED", "CANCELED")

CLUSTER_OVERRIDES: dict[str, Any] = {
    # A dead TaskManager refuses connections at once: one failed heartbeat RPC marks it lost,
    # so detection takes about one interval instead of the 50 s default timeout.
    "heartbeat.interval": 500,
    "heartbeat.timeout": 5000,
    "heartbeat.rpc-failure-threshold": 1,
    # Restart quickly, and never give up while the torture goes on.
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": 1000,
    "restart-strategy.fixed-delay.delay": "200 ms",
    # Checkpoints that cannot complete (a task is gone) must not fail the job.
    "execution.checkpointing.tolerable-failed-checkpoints": 1000,
    # An aligned barrier waits behind every record buffered before it: small network buffers
    # (and padded records, see TortureSpec.pad_bytes) keep that to a few dozen records, so a
    # checkpoint completes within a second of a restart, not once the whole input is done.
    "taskmanager.memory.segment-size": "4kb",
    # A checkpoint waits for the Python worker to finish its current bundle: keep it small.
    "python.fn-execution.bundle.size": 20,
    "python.fn-execution.bundle.time": 100,
}
"""Cluster configuration for fast kill-to-recovery cycles (flat Flink 2.x keys)."""


@dataclass(frozen=True)
class TortureSpec:
    """One scenario: ``records`` over ``users`` keys, ``kills`` TaskManager kills.

    ``delay_s`` is the latency of the agent's first durable call; it paces the stream (a key
    runs one record at a time) so that it lasts through every kill.
    """

    records: int = 400
    users: int = 8
    kills: int = 3
    delay_s: float = 0.05
    parallelism: int = 1
    checkpoint_interval_ms: int = 1000
    timeout_s: float = 150.0
    """The whole scenario, from submission to the job's end."""
    recovery_timeout_s: float = 45.0
    """How long a kill may go without a checkpoint completing after it."""
    spares: int = 0
    """TaskManagers kept idle beside the job's, so that it restarts on one without waiting
    for a new JVM (each kill still starts a new TaskManager)."""
    pad_bytes: int = 1000
    """Padding added to each input line, so that few records fit in a network buffer."""
    options: dict[str, Any] = field(default_factory=dict)
    """More agent options (``--option name=value``)."""


@dataclass(frozen=True)
class Kill:
    """One ``kill -9``: when (seconds since submission), how far the ledger was, and how long
    until a checkpoint completed again (None: it did not, within the recovery timeout)."""

    at_s: float
    ledger_lines: int
    pids: tuple[int, ...]
    recovered_s: float | None = None


@dataclass(frozen=True)
class TortureResult:
    """What one scenario did, and what recovery made of it."""

    spec: TortureSpec
    job_id: str
    kills: tuple[Kill, ...]
    state: str
    """The job's final state (``FINISHED`` when it recovered from every kill)."""
    report: RecoveryReport
    memory_equal: bool
    errors: list[dict[str, Any]]
    ledger_lines: int
    elapsed_s: float

    @property
    def finished(self) -> bool:
        return self.state == "FINISHED"

    @property
    def ok(self) -> bool:
        """Everything the scenario must prove (a repeated call is allowed per kill: a call
        interrupted between its side effect and its log write)."""
        return (
            self.finished
            and len(self.kills) >= self.spec.kills
            and self.report.ok
            and self.report.outputs == self.spec.records
            and self.memory_equal
            and not self.errors
            and self.report.repeated_calls <= len(self.kills)
        )


def torture_cluster(work_dir: Path, **overrides: Any) -> StandaloneCluster:
    """A (not yet started) cluster on free loopback ports, configured for fast recovery."""
    return StandaloneCluster(
        work_dir,
        REPO / "conf" / "config.yaml",
        rest_port=0,
        rpc_port=0,
        overrides={**CLUSTER_OVERRIDES, **overrides},
    )


def run_torture(
    cluster: StandaloneCluster,
    work_dir: Path,
    action_log: str,
    spec: TortureSpec,
    progress: Callable[[str], None] = lambda message: None,
) -> TortureResult:
    """Run the ``LedgerAgent`` job on a running ``cluster`` with its action log at
    ``action_log`` (a URL every TaskManager reaches), kill the TaskManager running it
    ``spec.kills`` times mid-stream, and check the outcome."""
    records = make_records(spec.records, spec.users)
    for _ in range(spec.spares + 1 - len(cluster.taskmanager_pids())):
        cluster.start_taskmanager()
    started = time.monotonic()
    job_id = submit_detached(cluster, _job_arguments(work_dir, action_log, spec, records))
    progress(f"submitted job {job_id} in {time.monotonic() - started:.1f} s")
    run = _Run(cluster, job_id, work_dir / "ledger.jsonl", started, spec, progress)
    kills = run.kill_repeatedly()
    stalled = bool(kills) and kills[-1].recovered_s is None
    state = job_state(cluster, job_id) if stalled else run.wait_for_end()
    if state not in TERMINAL:
        cancel_job(cluster, job_id)
    out = work_dir / "out"
    outputs = read_json_files(out / "outputs") if (out / "outputs").exists() else []
    memory = read_json_files(out / "memory") if (out / "memory").exists() else []
    errors = read_json_files(out / "errors") if (out / "errors").exists() else []
    ledger = read_ledger(run.ledger)
    return TortureResult(
        spec=spec,
        job_id=job_id,
        kills=kills,
        state=state,
        report=check_recovery(records, outputs, ledger),
        memory_equal=final_memory(memory) == expected_memory(records),
        errors=errors,
        ledger_lines=len(ledger),
        elapsed_s=time.monotonic() - started,
    )


def final_memory(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    """Each key's short-term memory in its last snapshot (the highest run sequence)."""
    last: dict[str, Any] = {}
    for snapshot in sorted(snapshots, key=lambda s: s["run_sequence"]):
        last[snapshot["key"]] = snapshot["short_term_memory"]
    return last


def _job_arguments(
    work_dir: Path, action_log: str, spec: TortureSpec, records: list[dict[str, Any]]
) -> list[str]:
    """Write the input and the plan; the arguments of ``jobs/agent_job.py`` that run them."""
    work_dir.mkdir(parents=True, exist_ok=True)
    data, out = work_dir / "input.jsonl", work_dir / "out"
    pad = "x" * spec.pad_bytes
    data.write_text("".join(json.dumps({**record, "pad": pad}) + "\n" for record in records))
    config = {"ledger": str(work_dir / "ledger.jsonl"), "delay_s": spec.delay_s}
    plan = save_plan(
        to_plan(LedgerAgent).model_copy(update={"config": config}), work_dir / "plan.json"
    )
    options = {"action-log": action_log, "error-policy": "fail", **spec.options}
    return [
        "--plan", str(plan),
        "--input", str(data),
        "--output", str(out),
        "--key", "user",
        "--memory-snapshots",
        "--parallelism", str(spec.parallelism),
        "--checkpoint-interval-ms", str(spec.checkpoint_interval_ms),
        *[arg for name, value in options.items() for arg in ("--option", f"{name}={value}")],
    ]  # fmt: skip


class _Run:
    """The kill loop of one submitted job."""

    def __init__(
        self,
        cluster: StandaloneCluster,
        job_id: str,
        ledger: Path,
        started: float,
        spec: TortureSpec,
        progress: Callable[[str], None],
    ) -> None:
        self.cluster, self.job_id, self.ledger = cluster, job_id, ledger
        self.started, self.spec, self.progress = started, spec, progress
        self.deadline = started + spec.timeout_s

    def kill_repeatedly(self) -> tuple[Kill, ...]:
        """Kill the job's TaskManagers ``spec.kills`` times, each once the job has
        checkpointed since the previous kill and the ledger reached its share of the
        stream; stops early when the job ends or does not recover."""
        kills: list[Kill] = []
        since_ms = 0  # the first kill, too, waits for a checkpoint: something to restore
        replace = 0  # TaskManagers to start once the job recovered on a spare
        for number in range(self.spec.kills):
            recovered = self._wait_for_checkpoint_after(since_ms)
            if kills:
                kills[-1] = _recovered(kills[-1], recovered)
            if recovered is None:
                self.progress(f"no checkpoint before kill {number + 1}")
                break
            for _ in range(replace):
                self.cluster.start_taskmanager()  # not during the restart: CPU is short
            replace = 0
            # Spread the kills over the first part of the stream (each restart takes its own
            # share before it checkpoints), leaving its end to run without a kill.
            target = 2 * self.spec.records * (number + 1) // (self.spec.kills + 3)
            if not self._wait_for_ledger(target):
                state = job_state(self.cluster, self.job_id)
                self.progress(f"job {state} before kill {number + 1}")
                break
            lines = _count_lines(self.ledger)
            pids = kill_job_taskmanagers(self.cluster, self.job_id)
            if not pids:
                raise RuntimeError(f"no living TaskManager runs job {self.job_id}")
            since_ms = time.time_ns() // 1_000_000
            kills.append(Kill(time.monotonic() - self.started, lines, pids))
            self.progress(f"kill {number + 1} at {kills[-1].at_s:.1f} s: {pids}, ledger {lines}")
            if self.spec.spares:
                replace = len(pids)
            else:
                for _ in pids:
                    self.cluster.start_taskmanager()
        else:
            if kills:  # how long the last kill took to recover from
                kills[-1] = _recovered(kills[-1], self._wait_for_checkpoint_after(since_ms))
        return tuple(kills)

    def wait_for_end(self) -> str:
        """The job's terminal state, or its state at the deadline."""
        state = job_state(self.cluster, self.job_id)
        while state not in TERMINAL and time.monotonic() < self.deadline:
            time.sleep(0.5)
            state = job_state(self.cluster, self.job_id)
        self.progress(f"job {state} after {time.monotonic() - self.started:.1f} s")
        return state

    def _wait_for_checkpoint_after(self, since_ms: int) -> float | None:
        """Seconds from ``since_ms`` until a checkpoint completed after it (the job's end
        counts); None when that takes longer than the recovery timeout."""
        give_up = min(self.deadline, time.monotonic() + self.spec.recovery_timeout_s)
        while time.monotonic() < give_up:
            completed = last_checkpoint_ms(self.cluster, self.job_id)
            if completed > since_ms:
                return (completed - since_ms) / 1000
            if job_state(self.cluster, self.job_id) in TERMINAL:
                return (time.time_ns() // 1_000_000 - since_ms) / 1000
            time.sleep(0.1)
        return None

    def _wait_for_ledger(self, lines: int) -> bool:
        while time.monotonic() < self.deadline:
            if job_state(self.cluster, self.job_id) in TERMINAL:
                return False
            if _count_lines(self.ledger) >= lines:
                return True
            time.sleep(0.1)
        return False


def _recovered(kill: Kill, seconds: float | None) -> Kill:
    return Kill(kill.at_s, kill.ledger_lines, kill.pids, seconds)


def submit_detached(cluster: StandaloneCluster, args: list[str]) -> str:
    """Submit ``jobs/agent_job.py`` without waiting for it to end; returns the job id."""
    result = cluster.submit(AGENT_JOB, *args, detached=True, timeout=180)
    found = re.search(r"JobID ([0-9a-f]{32})", result.stdout + result.stderr)
    if result.returncode != 0 or found is None:
        raise RuntimeError(f"submission failed:\n{result.stdout}\n{result.stderr}")
    return found.group(1)


def kill_job_taskmanagers(cluster: StandaloneCluster, job_id: str) -> tuple[int, ...]:
    """``kill -9`` the TaskManagers running the job, with their Python workers, as a dead
    machine or container would lose them (an orphaned worker would go on calling)."""
    pids = [cluster.taskmanager_pid(tm) for tm in cluster.job_taskmanagers(job_id)]
    return tuple(cluster.kill_taskmanager(pid, tree=True) for pid in pids if pid is not None)


def job_state(cluster: StandaloneCluster, job_id: str) -> str:
    try:
        return cluster.rest(f"/jobs/{job_id}")["state"]
    except (urllib.error.URLError, ConnectionError, TimeoutError, KeyError):
        return "UNKNOWN"


def last_checkpoint_ms(cluster: StandaloneCluster, job_id: str) -> int:
    """When the job's latest checkpoint completed (epoch ms), 0 if none did."""
    try:
        latest = cluster.rest(f"/jobs/{job_id}/checkpoints").get("latest") or {}
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0
    completed = latest.get("completed") or {}
    return int(completed.get("latest_ack_timestamp") or 0)


def cancel_job(cluster: StandaloneCluster, job_id: str, timeout: float = 30) -> str:
    """Cancel a job that did not end (so the next scenario runs alone); its final state."""
    request = urllib.request.Request(
        f"{cluster.rest_url}/jobs/{job_id}?mode=cancel", method="PATCH"
    )
    with contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError):
        urllib.request.urlopen(request, timeout=5).close()
    deadline = time.monotonic() + timeout
    state = job_state(cluster, job_id)
    while state not in TERMINAL and time.monotonic() < deadline:
        time.sleep(0.5)
        state = job_state(cluster, job_id)
    return state


def _count_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0
