"""Helpers shared by the benchmarks: environments, a cheap source, a discarding sink."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyflink.common import Configuration, Types, WatermarkStrategy
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.datastream.connectors.base import Sink
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

from bench.agents import CounterAgent, RawCounter, ToRecord, record_key

DISCARDING_SINK = "org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink"
RECORD_TYPE = Types.TUPLE([Types.STRING(), Types.LONG()])


def make_env(
    parallelism: int = 1, config: dict[str, str] | None = None
) -> StreamExecutionEnvironment:
    """A fresh local environment; ``config`` holds Flink options such as
    ``python.fn-execution.bundle.time``."""
    configuration = Configuration()
    for name, value in (config or {}).items():
        configuration.set_string(name, str(value))
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(parallelism)
    env.set_python_executable(sys.executable)
    return env


def enable_thread_mode() -> None:
    """Let ``python.execution-mode: thread`` work: Python then runs inside the JVM (pemja),
    which must find the venv's packages and ``bench``. Call before the first environment
    (the JVM is started once, with this process's environment)."""
    paths = [str(Path(__file__).resolve().parent.parent)]
    paths += [p for p in sys.path if p.endswith("site-packages")]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)


def sequence(env: StreamExecutionEnvironment, records: int) -> DataStream:
    """``records`` longs from a Java source: no Python involved."""
    return env.from_source(
        NumberSequenceSource(0, records - 1), WatermarkStrategy.no_watermarks(), "sequence"
    )


def keyed_records(env: StreamExecutionEnvironment, records: int, num_keys: int) -> DataStream:
    """``(key, n)`` tuples over ``num_keys`` keys (a Python map, chained to the key selector)."""
    return sequence(env, records).map(ToRecord(num_keys), output_type=RECORD_TYPE)


def raw_counter_stream(env: StreamExecutionEnvironment, records: int, num_keys: int) -> DataStream:
    """``RawCounter`` over ``(key, n)`` records of ``num_keys`` keys: raw PyFlink's job."""
    stream = key_stream(keyed_records(env, records, num_keys))
    return stream.process(RawCounter(), output_type=Types.PICKLED_BYTE_ARRAY())


def counter_agent_stream(
    env: StreamExecutionEnvironment, records: int, num_keys: int, **options: Any
) -> DataStream:
    """``CounterAgent`` over the same records, with agent ``options``: the agent's job."""
    from flink_agents.api import AgentsExecutionEnvironment

    environment = AgentsExecutionEnvironment.get_execution_environment(env, **options)
    return (
        environment.from_datastream(
            keyed_records(env, records, num_keys), key_selector=record_key, key_type=Types.STRING()
        )
        .apply(CounterAgent)
        .to_datastream()
    )


def discard(stream: DataStream) -> None:
    stream.sink_to(Sink(DISCARDING_SINK))


def key_stream(stream: DataStream) -> Any:
    return stream.key_by(record_key, key_type=Types.STRING())


class Timing:
    """Wall clock and CPU seconds of one job: this process (the client and, in loopback
    mode, the Python worker) and the JVM it started (the MiniCluster)."""

    __slots__ = ("jvm_cpu", "py_cpu", "wall")

    def __init__(self, wall: float, py_cpu: float, jvm_cpu: float) -> None:
        self.wall, self.py_cpu, self.jvm_cpu = wall, py_cpu, jvm_cpu


def timed(env: StreamExecutionEnvironment, name: str) -> Timing:
    """Run the job; wall-clock seconds of ``env.execute()``, from submission to its end."""
    py_before, jvm_before = _process_cpu(), _children_cpu()
    started = time.perf_counter()
    env.execute(name)
    wall = time.perf_counter() - started
    return Timing(wall, _process_cpu() - py_before, _children_cpu() - jvm_before)


def _process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _children_cpu() -> float:
    """CPU seconds of this process's live children (the gateway JVM), from /proc."""
    total = 0
    me = os.getpid()
    ticks = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:  # ppid
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def machine_summary() -> str:
    """One line about the machine, for the benchmark output."""
    cpu = "?"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    java = "?"
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
        java = (out.stderr or out.stdout).splitlines()[0]
    except (OSError, IndexError):
        pass
    from importlib.metadata import version

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"load average now: {load}; flink_agents source sha256: {source_fingerprint()}\n"
        f"cpus={os.cpu_count()} cpu={cpu!r} python={platform.python_version()} "
        f"apache-flink={version('apache-flink')} java={java!r}"
    )


def source_fingerprint() -> str:
    """A short hash of the flink_agents sources measured (the code moves between runs)."""
    root = Path(__file__).resolve().parent.parent / "flink_agents"
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


FIGURES_ENV = "BENCH_FIGURES"
"""Names the JSON-lines file the benchmarks append their headline figures to (``bench/run_all.sh``
sets it; ``bench.goals`` reads it). Unset: figures are only printed."""


def record_figure(figure: str, value: float, detail: str = "") -> None:
    """Append one measured figure (an id such as ``state.thread.no_log_over_raw``, its value, and
    what it was measured on) to the file ``$BENCH_FIGURES`` names, if set."""
    path = os.environ.get(FIGURES_ENV)
    if not path:
        return
    entry = {
        "figure": figure,
        "value": value,
        "detail": detail,
        "at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": source_fingerprint(),
        "load": os.getloadavg()[0],
    }
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(entry) + "\n")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table with right-aligned columns (first column left-aligned)."""
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        pairs = enumerate(zip(row, widths, strict=True))
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in pairs)

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def timed_rounds(
    jobs: dict[str, Any], repeat: int, config: dict[str, str]
) -> dict[str, list[Timing]]:
    """Each job's ``Timing`` in each of ``repeat`` rounds, the jobs alternating within each
    round (``jobs``: name -> a function that builds the job on an env); prints each round's
    walls as it ends."""
    runs: dict[str, list[Timing]] = {name: [] for name in jobs}
    for round_ in range(repeat):
        for name, build in jobs.items():
            env = make_env(config=config)
            build(env)
            runs[name].append(timed(env, name))
        print(
            f"  round {round_ + 1}: " + ", ".join(f"{t[-1].wall:.2f}" for t in runs.values()),
            flush=True,
        )
    return runs


def median_walls(jobs: dict[str, Any], repeat: int, config: dict[str, str]) -> dict[str, float]:
    """Each job's median wall-clock seconds over ``repeat`` rounds (``timed_rounds``)."""
    runs = timed_rounds(jobs, repeat, config)
    return {name: statistics.median(t.wall for t in timings) for name, timings in runs.items()}


def median_run(timings: list[Timing]) -> Timing:
    """The median run by wall clock (the lower middle one of an even count)."""
    return sorted(timings, key=lambda t: t.wall)[(len(timings) - 1) // 2]
