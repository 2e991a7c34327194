"""Start-up and memory (issue 13, goal 5): time to first output and process-tree peak RSS of
the agent job against raw PyFlink doing the same state work.

The jobs are those of ``state_throughput.py``: a Java number sequence mapped to ``(key, n)``
over 128 keys, then either ``bench.agents.RawCounter`` (a ``KeyedProcessFunction`` on a
``MapState``) or ``bench.agents.CounterAgent`` (with its default action log, and with
``action_log="none"``), then a discarding sink, at parallelism 1. Both jobs get the same
``FirstOutput`` map right after the operator: on its first record it writes
``time.monotonic()`` to a file (system-wide on Linux, so comparable across the client, the
JVM and its embedded Python); it counts the records it sees and writes the count when it
closes (a check that every record produced its output). The marker starts a new chain, so
it is a Python operator of its own in both jobs: PyFlink would fuse it into the raw job's
operator, but cannot into the agent's (whose output also feeds its error side output), and
an asymmetric marker would charge the agent for it. It thus sees the first record once it
has crossed the JVM, as the sink does (in process mode: once the worker has flushed it),
through a local channel to a task of its own (flushed within Flink's 100 ms buffer timeout).

Every measured job runs in a fresh subprocess (this module with ``--child``): PyFlink starts
one gateway JVM per client process, and that JVM hosts the MiniCluster (and, in thread mode,
the Python operators), so its memory would otherwise carry over from one job to the next.
Nothing is warmed up: each job is a first job, as it is for a user.

- time to first output: from ``env.execute()`` (submission: MiniCluster start, job
  deployment, the Python operator's start included) to the first record through the marker.
  The graph's construction before it ("build") is shown apart.
- peak RSS: this (parent) process samples, every ~50 ms from ``/proc/<pid>/statm``, the
  resident memory of the client process (which hosts the Python worker in process mode,
  loopback) and of all its descendants (the MiniCluster JVM); the peak of the sum between
  submission and the end of ``execute()`` counts. The set of descendants is refreshed every
  second (a scan of ``/proc`` costs ~20 ms here). RSS counts shared pages in each process.

Each figure is the median of ``--repeat`` runs; the jobs' order rotates between rounds.

    PYTHONPATH=/work/main .venv/bin/python -m bench.startup_memory [--mode thread|process]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyflink.common import Types
from pyflink.datastream import MapFunction, RuntimeContext

FIRST_OUTPUT_GOAL_S = 0.5
RSS_GOAL = 1.10
RAW, AGENT, AGENT_NO_LOG = "raw", "agent", "agent-no-log"
JOBS = {
    RAW: "raw KeyedProcessFunction + MapState",
    AGENT: "agent (2 actions), default action log",
    AGENT_NO_LOG: "agent (2 actions), action_log=none",
}
RESULT = "STARTUP_MEMORY_RESULT "
SAMPLE_S = 0.05
TREE_REFRESH_S = 1.0
PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 1024 * 1024


# -- shipped to Flink (imported as bench.startup_memory by the worker) -----------------------


class FirstOutput(MapFunction):
    """Passes records through; writes the monotonic time of the first one to ``path``
    ``.first`` and, when it closes, the number of records it saw to ``path`` ``.count``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.count = 0

    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = 0

    def map(self, value: Any) -> Any:
        if not self.count:
            now = time.monotonic()
            with open(self.path + ".first", "w", encoding="ascii") as out:
                out.write(repr(now))
        self.count += 1
        return value

    def close(self) -> None:
        with open(self.path + ".count", "w", encoding="ascii") as out:
            out.write(str(self.count))


# -- the child: one job in a fresh client process and JVM ------------------------------------


def child(spec: dict[str, Any]) -> int:
    """Build and run one job; print its timings on one ``RESULT`` line."""
    from bench import agents
    from bench._common import discard, enable_thread_mode, key_stream, keyed_records, make_env
    from bench.startup_memory import FirstOutput as ShippedFirstOutput  # not __main__'s

    job, records, mode, marker = spec["job"], spec["records"], spec["mode"], spec["marker"]
    config = {"python.execution-mode": mode}
    if mode == "thread":
        enable_thread_mode()
    started = time.monotonic()
    env = make_env(config=config)  # starts the gateway JVM
    built_from = time.monotonic()
    if job == RAW:
        stream = key_stream(keyed_records(env, records, agents.NUM_KEYS)).process(
            agents.RawCounter(), output_type=Types.PICKLED_BYTE_ARRAY()
        )
    else:
        from flink_agents.api import AgentsExecutionEnvironment

        options = {"action_log": "none"} if job == AGENT_NO_LOG else {}
        environment = AgentsExecutionEnvironment.get_execution_environment(env, **options)
        stream = (
            environment.from_datastream(
                keyed_records(env, records, agents.NUM_KEYS),
                key_selector=agents.record_key,
                key_type=Types.STRING(),
            )
            .apply(agents.CounterAgent)
            .to_datastream()
        )
    marked = stream.map(ShippedFirstOutput(marker), output_type=Types.PICKLED_BYTE_ARRAY())
    discard(marked.name("first-output marker").start_new_chain())  # see the module's doc
    submitted = time.monotonic()
    env.execute(f"startup-memory {job}")
    ended = time.monotonic()
    first_file, count_file = Path(marker + ".first"), Path(marker + ".count")
    result = {
        "jvm_start_s": built_from - started,
        "build_s": submitted - built_from,
        "submitted": submitted,
        "ended": ended,
        "first": float(first_file.read_text()) if first_file.exists() else None,
        "outputs": int(count_file.read_text()) if count_file.exists() else None,
    }
    print(RESULT + json.dumps(result), flush=True)
    return 0


# -- the parent: run each job in a subprocess, sample its process tree -----------------------


class TreeSampler:
    """RSS of a process and all its descendants, read from /proc."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.pids: list[int] = [root]
        self.refreshed = 0.0

    def refresh(self) -> None:
        parents: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    ppid = int(stat.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry))
        tree, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(parents.get(pid, ()))
        self.pids = tree
        self.refreshed = time.monotonic()

    def sample(self) -> tuple[int, int]:
        """(client RSS, descendants' RSS) in bytes."""
        if time.monotonic() - self.refreshed >= TREE_REFRESH_S:
            self.refresh()
        client = others = 0
        for pid in self.pids:
            try:
                with open(f"/proc/{pid}/statm", "rb") as statm:
                    rss = int(statm.read().split()[1]) * PAGE
            except (OSError, IndexError, ValueError):
                continue
            if pid == self.root:
                client = rss
            else:
                others += rss
        return client, others


@dataclass
class Run:
    job: str
    first_output_s: float | None
    build_s: float
    jvm_start_s: float
    job_s: float
    rss_at_submit: int
    peak_rss: int
    peak_client: int
    peak_descendants: int
    outputs: int | None
    samples: int
    notes: list[str] = field(default_factory=list)


def run_child(job: str, records: int, mode: str, timeout: float) -> Run:
    with tempfile.TemporaryDirectory(prefix="startup-memory-") as tmp:
        spec = {"job": job, "records": records, "mode": mode, "marker": f"{tmp}/marker"}
        out_path, err_path = Path(tmp, "stdout"), Path(tmp, "stderr")
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "bench.startup_memory", "--child", json.dumps(spec)],
                stdout=out,
                stderr=err,
                cwd=Path(__file__).resolve().parent.parent,
            )
            sampler = TreeSampler(proc.pid)
            samples: list[tuple[float, int, int]] = []
            deadline = time.monotonic() + timeout
            while proc.poll() is None:
                now = time.monotonic()
                if now > deadline:
                    proc.kill()  # our own child, by its pid; its JVM exits with it
                    proc.wait()
                    raise SystemExit(f"{job}: no result after {timeout:.0f} s")
                client, others = sampler.sample()
                samples.append((now, client, others))
                time.sleep(max(0.0, SAMPLE_S - (time.monotonic() - now)))
        stdout = out_path.read_text(errors="replace")
        lines = [line for line in stdout.splitlines() if line.startswith(RESULT)]
        if proc.returncode != 0 or not lines:
            tail = err_path.read_text(errors="replace")[-3000:]
            raise SystemExit(f"{job}: child exited {proc.returncode}\n{stdout[-2000:]}\n{tail}")
    result = json.loads(lines[-1][len(RESULT) :])
    submitted, ended = result["submitted"], result["ended"]
    during = [s for s in samples if submitted <= s[0] <= ended]
    before = [s for s in samples if s[0] < submitted]
    peak = max(during, key=lambda s: s[1] + s[2]) if during else (0, 0, 0)
    first = result["first"]
    run = Run(
        job=job,
        first_output_s=None if first is None else first - submitted,
        build_s=result["build_s"],
        jvm_start_s=result["jvm_start_s"],
        job_s=ended - submitted,
        rss_at_submit=(before[-1][1] + before[-1][2]) if before else 0,
        peak_rss=peak[1] + peak[2],
        peak_client=max((s[1] for s in during), default=0),
        peak_descendants=max((s[2] for s in during), default=0),
        outputs=result["outputs"],
        samples=len(during),
    )
    if run.outputs != records:
        run.notes.append(f"{run.outputs} outputs for {records} records")
    return run


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs per job; medians count")
    parser.add_argument(
        "--mode",
        choices=["thread", "process"],
        default="thread",
        help="python.execution-mode of every job (default: thread, as for our jobs)",
    )
    parser.add_argument("--timeout", type=float, default=900, help="seconds per job")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(json.loads(args.child))

    from bench import agents
    from bench._common import machine_summary, record_figure, table

    print("== start-up and memory: agent vs raw KeyedProcessFunction (issue 13, goal 5) ==")
    print(machine_summary())
    print(
        f"records={args.records:,} keys={agents.NUM_KEYS} parallelism=1 sink=DiscardingSink "
        f"mode={args.mode} repeat={args.repeat}; one fresh client process and JVM per job; "
        f"RSS sampled every {SAMPLE_S * 1000:.0f} ms",
        flush=True,
    )
    order = list(JOBS)
    runs: dict[str, list[Run]] = {job: [] for job in order}
    for round_ in range(max(1, args.repeat)):
        shift = round_ % len(order)
        for job in order[shift:] + order[:shift]:
            run = run_child(job, args.records, args.mode, args.timeout)
            runs[job].append(run)
            first = "none" if run.first_output_s is None else f"{run.first_output_s:.2f} s"
            print(
                f"  round {round_ + 1}: {job}: first output {first}, build {run.build_s:.2f} s, "
                f"execute {run.job_s:.1f} s, RSS at submit {run.rss_at_submit / MIB:.0f} MiB, "
                f"peak {run.peak_rss / MIB:.0f} MiB (client {run.peak_client / MIB:.0f}, "
                f"JVM tree {run.peak_descendants / MIB:.0f}; {run.samples} samples)"
                + "".join(f"  WARNING: {note}" for note in run.notes),
                flush=True,
            )

    def med(job: str, attr: str) -> float:
        return median([v for r in runs[job] if (v := getattr(r, attr)) is not None])

    rows = []
    for job in order:
        rows.append(
            (
                JOBS[job],
                med(job, "first_output_s"),
                med(job, "build_s"),
                med(job, "jvm_start_s"),
                med(job, "job_s"),
                med(job, "rss_at_submit") / MIB,
                med(job, "peak_rss") / MIB,
                med(job, "peak_client") / MIB,
                med(job, "peak_descendants") / MIB,
            )
        )
    print()
    print(
        table(
            [
                "job (medians)",
                "first output s",
                "build s",
                "JVM start s",
                "execute s",
                "RSS submit MiB",
                "peak RSS MiB",
                "client MiB",
                "JVM tree MiB",
            ],
            rows,
        )
    )
    print()
    raw_first, raw_peak = med(RAW, "first_output_s"), med(RAW, "peak_rss")
    for job in (AGENT, AGENT_NO_LOG):
        delta = med(job, "first_output_s") - raw_first
        ratio = med(job, "peak_rss") / raw_peak
        first_met = "MET" if delta <= FIRST_OUTPUT_GOAL_S else "NOT MET"
        rss_met = "MET" if ratio <= RSS_GOAL else "NOT MET"
        which = "agent" if job == AGENT else "agent_no_log"
        detail = f"{args.mode} mode, median of {args.repeat}"
        record_figure(f"startup.{args.mode}.first_output_delta_s.{which}", delta, detail)
        record_figure(f"startup.{args.mode}.peak_rss_ratio.{which}", ratio, detail)
        print(
            f"{JOBS[job]}: first output {delta:+.2f} s vs raw ({first_met}: "
            f"<= {FIRST_OUTPUT_GOAL_S} s); peak RSS {ratio:.2f}x raw "
            f"({rss_met}: <= {RSS_GOAL:.2f})"
        )
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average at the end: {load}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
