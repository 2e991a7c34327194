"""Checkpoints, restore and memory at many keys (issue 45 goals 3 and 4): the memory agent
against raw PyFlink holding the same data, on the heap, RocksDB (full and incremental
checkpoints) and ForSt state backends.

For each backend, raw (``bench.agents.RawCounter``, a ``MapState`` of two fields a key) and
the agent (``bench.agents.CounterAgent``, the same two short-term fields a key, its default
action log) each run twice, every run a fresh child process (this module with ``--child``):

1. **fill**: one record for each of ``--keys`` keys, read by a ``FileSource`` that keeps
   watching its directory (so the job keeps running and checkpointing when the input is
   done), checkpoints every 2 s, retained on cancellation. Once every record has passed
   (``scale_agents.Progress`` counts them into a file), the child waits for a checkpoint
   triggered after that moment, reads its sizes from Flink's REST API (``state_size``: the
   whole state; ``checkpointed_size``: what this checkpoint wrote, smaller when incremental)
   with the sum of what every checkpoint of the run wrote, and stops the job with a savepoint
   (Flink's canonical format, as for an upgrade, but ForSt's native one: it takes no
   canonical savepoint; its size on disk too). The parent samples
   the resident memory of the child and its JVM every 50 ms (``startup_memory.TreeSampler``):
   peak RSS.
2. **restore**: the same job restored from that savepoint, with a second file of one more
   record for each key. Time from submission to the first outputs (restore included, against
   the fill run's time from submission to its first outputs), the rate over windows of 1% of
   the records, and the time until a window first reaches 90% of the fill run's median
   window rate ("full speed").

With ``--fields N`` each key's memory is a tree of ``N`` leaves instead
(``scale_agents.FieldsAgent`` against ``RawFields``: the fill writes the tree, then each
record reads one leaf and writes two), which shows how the agent's fixed state per key (its
control value, its objects' markers) weighs against a larger memory.

Thread mode, parallelism 1. ``--jvm-heap 1g`` gives every job's JVM a fixed heap, as a
TaskManager has: left to itself, a local MiniCluster's JVM grows its heap as its
collector sees fit (up to a quarter of the machine's memory), and each job's peak RSS
moves with that.

    PYTHONPATH=$PWD .venv/bin/python -m bench.scale_checkpoints [--keys 1000000] [--jvm-heap 1g]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyflink.common import Duration, Types, WatermarkStrategy
from pyflink.datastream.connectors.file_system import FileSource, StreamFormat

from bench import agents, scale_agents
from bench._common import (
    discard,
    enable_thread_mode,
    key_stream,
    machine_summary,
    make_env,
    record_figure,
    table,
)
from bench.startup_memory import TreeSampler
from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.testing import free_port, stop_with_savepoint

BACKENDS = {
    "heap": {"state.backend.type": "hashmap"},
    "rocksdb": {"state.backend.type": "rocksdb", "execution.checkpointing.incremental": "false"},
    "rocksdb-incremental": {
        "state.backend.type": "rocksdb",
        "execution.checkpointing.incremental": "true",
    },
    "forst": {"state.backend.type": "forst"},
}
RESULT = "SCALE_CHECKPOINTS_RESULT "
SIZE_GOAL, RSS_GOAL = 1.3, 1.10
MIB = 1024 * 1024


# -- the child: one job, one run ------------------------------------------------------------


def child(spec: dict[str, Any]) -> int:
    enable_thread_mode()
    work = Path(spec["work"])
    config = {
        "python.execution-mode": "thread",
        **BACKENDS[spec["backend"]],
        "rest.port": str(spec["port"]),
        "state.checkpoints.dir": f"file://{work}/checkpoints",
        "execution.checkpointing.interval": "2s",
        "web.checkpoints.history": "1000",
    }
    if spec.get("restore"):
        config["execution.savepoint.path"] = spec["restore"]
    env = make_env(config=config)
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(work / "input"))
        .monitor_continuously(Duration.of_seconds(1))
        .build()
    )
    lines = env.from_source(source, WatermarkStrategy.no_watermarks(), "input")
    fields = spec["fields"]
    if fields:
        parse = scale_agents.ParseFieldsRecord(fields)
        records = lines.map(parse, output_type=scale_agents.RECORD_TYPE)
    else:
        records = lines.map(scale_agents.parse_record, output_type=_RECORD)
    if spec["job"] == "raw":
        function = scale_agents.RawFields() if fields else agents.RawCounter()
        outputs = key_stream(records).process(function, output_type=Types.PICKLED_BYTE_ARRAY())
    else:
        environment = AgentsExecutionEnvironment.get_execution_environment(
            env, action_log=f"sqlite://{work}/action_log.db"
        )
        outputs = (
            environment.from_datastream(
                records, key_selector=agents.record_key, key_type=Types.STRING()
            )
            .apply(scale_agents.FieldsAgent if fields else agents.CounterAgent)
            .to_datastream()
        )
    progress = work / f"progress-{spec['phase']}.txt"
    every = max(1, spec["records"] // 100)
    discard(
        outputs.map(
            scale_agents.Progress(str(progress), every), output_type=Types.PICKLED_BYTE_ARRAY()
        )
    )
    submitted = time.time()
    client = env.execute_async(f"scale-{spec['job']}-{spec['phase']}")
    job_id = str(client.get_job_id())
    timeline = _wait_for(progress, spec["records"], spec["timeout"])
    done = time.time()
    checkpoint = _checkpoint_after(spec["port"], job_id, done, spec["timeout"])
    checkpoint["written_during_run"] = sum(
        entry.get("checkpointed_size", 0)
        for entry in _rest(spec["port"], f"/jobs/{job_id}/checkpoints")["history"]
        if entry["status"] == "COMPLETED"
    )
    # Stopped with a savepoint: Flink's canonical format, what an upgrade restores from
    # (ForSt takes only its native one).
    savepoint = stop_with_savepoint(
        client, f"file://{work}/savepoints", native=spec["backend"] == "forst"
    )
    checkpoint["savepoint"] = savepoint
    checkpoint["savepoint_bytes"] = sum(
        path.stat().st_size for path in (work / "savepoints").rglob("*") if path.is_file()
    )
    print(
        RESULT
        + json.dumps(
            {"submitted": submitted, "done": done, "timeline": timeline, "checkpoint": checkpoint}
        ),
        flush=True,
    )
    return 0


_RECORD = Types.TUPLE([Types.STRING(), Types.LONG()])


def _wait_for(progress: Path, records: int, timeout: float) -> list[tuple[int, float]]:
    """The progress file's ``(count, time)`` lines once the count reaches ``records``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if progress.exists():
            timeline = [
                (int(count), float(at))
                for count, at in (line.split() for line in progress.read_text().splitlines())
            ]
            if timeline and timeline[-1][0] >= records:
                return timeline
        time.sleep(0.2)
    raise SystemExit(f"{progress}: not every record passed in {timeout:.0f} s")


def _rest(port: int, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://localhost:{port}{path}", timeout=10) as response:
        return json.load(response)


def _checkpoint_after(port: int, job_id: str, moment: float, timeout: float) -> dict[str, Any]:
    """The first completed checkpoint triggered after ``moment`` (seconds), from REST."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        latest = _rest(port, f"/jobs/{job_id}/checkpoints")["latest"]["completed"]
        if latest and latest["trigger_timestamp"] / 1000 > moment:
            return latest
        time.sleep(0.5)
    raise SystemExit(f"no checkpoint completed in {timeout:.0f} s after the input")


# -- the parent: runs, samples, reports -----------------------------------------------------


@dataclass
class Run:
    result: dict[str, Any]
    peak_rss: int

    @property
    def first_s(self) -> float:
        """Submission to the first 1% of the outputs."""
        return self.result["timeline"][0][1] - self.result["submitted"]

    def windows(self) -> list[tuple[float, float]]:
        """``(records/s, end time)`` of each window between two progress lines."""
        return [
            ((b[0] - a[0]) / (b[1] - a[1]), b[1])
            for a, b in itertools.pairwise(self.result["timeline"])
            if b[1] > a[1]
        ]

    @property
    def rate(self) -> float:
        """Records a second from the first 1% of the outputs to the last."""
        (c0, t0), (c1, t1) = self.result["timeline"][0], self.result["timeline"][-1]
        return (c1 - c0) / (t1 - t0)

    def full_speed_s(self, target: float) -> float | None:
        """Submission to the end of the first window at >= ``target`` records/s."""
        for rate, end in self.windows():
            if rate >= target:
                return end - self.result["submitted"]
        return None

    @property
    def checkpoint(self) -> dict[str, Any]:
        return self.result["checkpoint"]


def run_child(spec: dict[str, Any]) -> Run:
    out_path = Path(spec["work"]) / f"child-{spec['phase']}.log"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.scale_checkpoints", "--child", json.dumps(spec)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=Path(__file__).resolve().parent.parent,
        )
        sampler, peak = TreeSampler(proc.pid), 0
        while proc.poll() is None:
            client, others = sampler.sample()
            peak = max(peak, client + others)
            time.sleep(0.05)
    text = out_path.read_text(errors="replace")
    lines = [line for line in text.splitlines() if line.startswith(RESULT)]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{spec['job']} {spec['phase']}: exited {proc.returncode}\n{text[-3000:]}")
    return Run(json.loads(lines[-1][len(RESULT) :]), peak)


def write_input(path: Path, keys: int, offset: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="ascii") as out:
        for i in range(keys):
            out.write(f"k{i},{offset + i}\n")


def measure(
    backend: str, job: str, keys: int, fields: int, root: Path, timeout: float
) -> tuple[Run, Run]:
    work = root / backend / job
    write_input(work / "input" / "part-0.txt", keys, 0)
    spec = {
        "work": str(work),
        "backend": backend,
        "job": job,
        "records": keys,
        "fields": fields,
        "port": free_port(),
        "timeout": timeout,
        "phase": "fill",
    }
    fill = run_child(spec)
    write_input(work / "input" / "part-1.txt", keys, keys)
    restore = run_child(
        {
            **spec,
            "phase": "restore",
            "port": free_port(),
            "restore": fill.checkpoint["savepoint"],
        }
    )
    return fill, restore


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--backends", default="heap,rocksdb,rocksdb-incremental,forst")
    parser.add_argument(
        "--fields",
        type=int,
        default=0,
        help="0: the counter's two fields a key; N (10, 100, ...): a tree of N leaves a key "
        "(scale_agents.FieldsAgent and RawFields)",
    )
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument(
        "--jvm-heap",
        help="a fixed JVM heap for every job (e.g. 1g: -Xms and -Xmx, as a TaskManager has "
        "from Flink's memory model); default: the JVM's own sizing",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(json.loads(args.child))
    if args.jvm_heap:  # read by PyFlink's gateway launcher in each child
        heap = f"-Xms{args.jvm_heap} -Xmx{args.jvm_heap}"
        os.environ["JVM_ARGS"] = f"{os.environ.get('JVM_ARGS', '')} {heap}".strip()
    backends = args.backends.split(",")
    print("== scale: checkpoints, restore and memory at many keys ==")
    print(machine_summary())
    print(f"JVM heap: {args.jvm_heap or 'the JVM default'}")
    memory = f"a tree of {args.fields} leaves" if args.fields else "the counter's two fields"
    print(
        f"keys={args.keys:,} (one record a key to fill, one more after the restore), "
        f"memory: {memory} a key",
        flush=True,
    )
    rows, ratios = [], []
    with tempfile.TemporaryDirectory(prefix="scale-checkpoints-") as tmp:
        for backend in backends:
            runs = {}
            for job in ("raw", "agent"):
                fill, restore = runs[job] = measure(
                    backend, job, args.keys, args.fields, Path(tmp), args.timeout
                )
                median_rate = statistics.median(rate for rate, _ in fill.windows())
                full = restore.full_speed_s(0.9 * median_rate)
                rows.append(
                    (
                        backend,
                        job,
                        fill.rate,
                        fill.checkpoint["state_size"] / MIB,
                        fill.checkpoint["checkpointed_size"] / MIB,
                        fill.checkpoint["written_during_run"] / MIB,
                        fill.checkpoint["savepoint_bytes"] / MIB,
                        fill.first_s,
                        restore.first_s,
                        "never" if full is None else f"{full:.1f}",
                        restore.rate,
                        fill.peak_rss / MIB,
                        restore.peak_rss / MIB,
                    )
                )
                print(table(HEADERS, rows[-1:]), flush=True)
            raw, agent = runs["raw"][0], runs["agent"][0]
            size = agent.checkpoint["state_size"] / raw.checkpoint["state_size"]
            rss = agent.peak_rss / raw.peak_rss
            ratios.append((backend, size, rss, runs["agent"][1].first_s / runs["raw"][1].first_s))
            detail = f"{args.keys:,} keys, {backend}"
            name = f"scale.checkpoint.{backend}"
            if args.fields:
                detail, name = f"{detail}, {args.fields} fields", f"{name}.{args.fields}-fields"
            record_figure(f"{name}.size_over_raw", size, detail)
            record_figure(f"{name}.rss_over_raw", rss, detail)
    print()
    print(table(HEADERS, rows))
    print()
    print(
        table(
            ["backend", "state size agent / raw", "peak RSS agent / raw", "restore agent / raw"],
            ratios,
        )
    )
    size_met = all(r[1] <= SIZE_GOAL for r in ratios)
    rss_met = all(r[2] <= RSS_GOAL for r in ratios)
    print(("MET" if size_met else "NOT MET") + f": checkpoint size agent/raw <= {SIZE_GOAL}")
    print(("MET" if rss_met else "NOT MET") + f": peak RSS agent/raw <= {RSS_GOAL}")
    return 0


HEADERS = [
    "backend",
    "job",
    "fill rec/s",
    "state MiB",
    "checkpointed MiB",
    "fill: written by all checkpoints MiB",
    "savepoint MiB",
    "fill: first outputs s",
    "restore: first outputs s",
    "restore: full speed s",
    "restore rec/s",
    "fill peak RSS MiB",
    "restore peak RSS MiB",
]


if __name__ == "__main__":
    sys.exit(main())
