"""Scale (issue 45): the memory agent's cost as keys and a key's memory grow, on the heap,
RocksDB and ForSt state backends, against raw PyFlink doing the same ``MapState`` work on the
same backend in the same run.

``keys``: ``bench.agents.CounterAgent`` (two actions a record, two short-term fields a key)
and ``bench.agents.RawCounter`` over 100, 10,000 and 1,000,000 keys, each key getting at
least three records (``max(--min-records, 3 x keys)``), with ``action_log="none"`` and with
the default (SQLite) log. Throughput is net of an empty job (source and discarding sink) of
as many records; the ratio is raw's time over the agent's, by wall clock and by CPU seconds
(this process and its JVM, which runs the Python of thread mode: steadier than the wall
clock on a shared machine).

``fields``: ``bench.scale_agents.FieldsAgent`` and ``RawFields`` over ``--field-keys`` keys
whose memory holds 10, 100 and 1,000 fields (a tree of objects, lists among the values). A
key's first record fills its memory; each of its ``--touches`` later records reads one field
and writes two. The fill is timed alone (a job of one record a key) and taken off, so the
figure is the cost of a record that touches a few fields: it should not grow with the size
of the memory.

``caches``: ``CounterAgent`` without a log at each ``--caches`` size of ``state-cache-keys``
against ``RawCounter``, by CPU (records in round robin: the per-key cache's worst case).

Every job is a fresh MiniCluster job, in thread mode (our default), at parallelism 1; each
figure is the median of ``--repeat`` rounds. ``--backends`` picks from heap (``hashmap``),
rocksdb and forst (each with Flink's defaults: RocksDB's local directory under the
TaskManager's temporary directory, no checkpoints). Before timing, every backend runs the
correctness check of ``state_throughput`` (both jobs' outputs and final values).

    PYTHONPATH=$PWD .venv/bin/python -m bench.scale keys [--keys 100,10000,1000000]
    PYTHONPATH=$PWD .venv/bin/python -m bench.scale fields [--fields 10,100,1000]
    PYTHONPATH=$PWD .venv/bin/python -m bench.scale caches --keys 10000 [--caches 0,4096,20000]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator

from pyflink.common import Types

from bench import agents, scale_agents
from bench._common import (
    Timing,
    counter_agent_stream,
    discard,
    enable_thread_mode,
    key_stream,
    machine_summary,
    median_run,
    median_walls,
    raw_counter_stream,
    record_figure,
    sequence,
    table,
    timed_rounds,
)
from bench.state_throughput import verify
from flink_agents.api import AgentsExecutionEnvironment

GOAL = 0.7
BACKENDS = {"heap": "hashmap", "rocksdb": "rocksdb", "forst": "forst"}


MANAGED_MEMORY: str | None = None
"""``--managed-memory``: the TaskManager's managed memory (RocksDB's and ForSt's block cache
and write buffers), else the MiniCluster's default (128 MiB)."""


def backend_config(backend: str) -> dict[str, str]:
    config = {"python.execution-mode": "thread", "state.backend.type": BACKENDS[backend]}
    if MANAGED_MEMORY is not None:
        config["taskmanager.memory.managed.size"] = MANAGED_MEMORY
    return config


def fields_records(env, records: int, keys: int, fields: int):
    return sequence(env, records).map(
        scale_agents.ToFieldsRecord(keys, fields), output_type=scale_agents.RECORD_TYPE
    )


def fields_agent(env, records: int, keys: int, fields: int):
    environment = AgentsExecutionEnvironment.get_execution_environment(env, action_log="none")
    return (
        environment.from_datastream(
            fields_records(env, records, keys, fields),
            key_selector=agents.record_key,
            key_type=Types.STRING(),
        )
        .apply(scale_agents.FieldsAgent)
        .to_datastream()
    )


def raw_fields(env, records: int, keys: int, fields: int):
    stream = key_stream(fields_records(env, records, keys, fields))
    return stream.process(scale_agents.RawFields(), output_type=Types.PICKLED_BYTE_ARRAY())


def _job(build: Callable, *args, **options) -> Callable:
    """A job for ``median_walls``: ``build``'s stream on the env, into a discarding sink."""
    return lambda env: discard(build(env, *args, **options))


def _cpu(timing: Timing) -> float:
    return timing.py_cpu + timing.jvm_cpu


def _cases(args: argparse.Namespace) -> Iterator[tuple[int, int, str]]:
    """``(keys, records, backend)`` for each ``--keys`` and backend, announced as it starts."""
    for keys in args.keys:
        records = max(args.min_records, 3 * keys)
        for backend in args.backends:
            print(f"-- {keys:,} keys, {records:,} records, {backend}", flush=True)
            yield keys, records, backend


def _baseline_jobs(records: int, keys: int) -> dict[str, Callable]:
    """The empty job (the source into a discarding sink: its time is taken off the
    others') and raw's."""
    return {
        "empty": lambda env: discard(sequence(env, records)),
        "raw": _job(raw_counter_stream, records, keys),
    }


def keys_curve(args: argparse.Namespace) -> None:
    rows = []
    for keys, records, backend in _cases(args):
        jobs = {
            **_baseline_jobs(records, keys),
            "no log": _job(counter_agent_stream, records, keys, action_log="none"),
        }
        if not args.no_default_log:
            jobs["default log"] = _job(counter_agent_stream, records, keys)
        rounds = timed_rounds(jobs, args.repeat, backend_config(backend))
        runs = {name: median_run(timings) for name, timings in rounds.items()}
        empty = runs["empty"]
        net = {name: runs[name].wall - empty.wall for name in jobs if name != "empty"}
        cpu = {name: _cpu(runs[name]) - _cpu(empty) for name in net}
        net.setdefault("default log", float("nan"))
        cpu.setdefault("default log", float("nan"))
        no_log, default = net["raw"] / net["no log"], net["raw"] / net["default log"]
        rows.append(
            (
                f"{keys:,}",
                backend,
                f"{records:,}",
                records / net["raw"],
                records / net["no log"],
                records / net["default log"],
                no_log,
                default,
                cpu["raw"] / cpu["no log"],
                cpu["raw"] / cpu["default log"],
                cpu["no log"] / records * 1e6,
            )
        )
        detail = f"{keys:,} keys, {records:,} records, {backend}, median of {args.repeat}"
        record_figure(f"scale.keys.{backend}.{keys}.no_log_over_raw", no_log, detail)
        record_figure(f"scale.keys.{backend}.{keys}.default_log_over_raw", default, detail)
        print(table(HEADERS_KEYS, rows[-1:]), flush=True)
    print()
    print(table(HEADERS_KEYS, rows))
    met = all(row[6] >= GOAL and row[7] >= GOAL for row in rows)
    print(("MET" if met else "NOT MET") + f": agent/raw >= {GOAL} at every size and backend")


HEADERS_KEYS = [
    "keys",
    "backend",
    "records",
    "raw rec/s",
    "no log rec/s",
    "default log rec/s",
    "no log / raw",
    "default log / raw",
    "by CPU: no log / raw",
    "default log / raw",
    "no log CPU us/rec",
]


def cache_sizes(args: argparse.Namespace) -> None:
    """The memory agent (no log) at each ``--caches`` size of ``state-cache-keys``, against
    raw, at each ``--keys`` and backend: what the per-key cache saves where its keys come
    round in turn (the cache's worst case) and where they all fit."""
    rows = []
    for keys, records, backend in _cases(args):
        jobs = _baseline_jobs(records, keys)
        for size in args.caches:
            jobs[f"cache {size}"] = _job(
                counter_agent_stream, records, keys, action_log="none", state_cache_keys=size
            )
        rounds = timed_rounds(jobs, args.repeat, backend_config(backend))
        runs = {name: median_run(timings) for name, timings in rounds.items()}
        cpu = {name: _cpu(run) - _cpu(runs["empty"]) for name, run in runs.items()}
        for size in args.caches:
            agent = cpu[f"cache {size}"]
            rows.append(
                (f"{keys:,}", backend, f"{size:,}", cpu["raw"] / agent, agent / records * 1e6)
            )
        print(table(HEADERS_CACHES, rows[-len(args.caches) :]), flush=True)
    print()
    print(table(HEADERS_CACHES, rows))


HEADERS_CACHES = ["keys", "backend", "state-cache-keys", "by CPU: agent / raw", "agent CPU us/rec"]


def fields_curve(args: argparse.Namespace) -> None:
    keys, touches = args.field_keys, args.touches
    records = keys * (1 + touches)
    rows = []
    for fields in args.fields:
        for backend in args.backends:
            print(f"-- {fields:,} fields a key, {keys:,} keys, {backend}", flush=True)
            jobs = {
                "raw fill": _job(raw_fields, keys, keys, fields),
                "raw": _job(raw_fields, records, keys, fields),
                "agent fill": _job(fields_agent, keys, keys, fields),
                "agent": _job(fields_agent, records, keys, fields),
            }
            walls = median_walls(jobs, args.repeat, backend_config(backend))
            touched = keys * touches
            raw_us = (walls["raw"] - walls["raw fill"]) / touched * 1e6
            agent_us = (walls["agent"] - walls["agent fill"]) / touched * 1e6
            fill_raw_ms = walls["raw fill"]
            fill_agent_ms = walls["agent fill"]
            rows.append(
                (
                    f"{fields:,}",
                    backend,
                    raw_us,
                    agent_us,
                    raw_us / agent_us,
                    fill_raw_ms,
                    fill_agent_ms,
                )
            )
            detail = f"{fields} fields, {keys:,} keys x {touches} touches, {backend}"
            record_figure(f"scale.fields.{backend}.{fields}.agent_us", agent_us, detail)
            record_figure(
                f"scale.fields.{backend}.{fields}.agent_over_raw", raw_us / agent_us, detail
            )
            print(table(HEADERS_FIELDS, rows[-1:]), flush=True)
    print()
    print(table(HEADERS_FIELDS, rows))
    for backend in args.backends:
        mine = [row for row in rows if row[1] == backend]
        if len(mine) > 1:
            growth = mine[-1][3] / mine[0][3]
            print(
                f"{backend}: a touch costs {growth:.2f}x as much at {mine[-1][0]} fields as at "
                f"{mine[0][0]} (agent); raw {mine[-1][2] / mine[0][2]:.2f}x"
            )


HEADERS_FIELDS = [
    "fields a key",
    "backend",
    "raw us/touch",
    "agent us/touch",
    "agent / raw",
    "raw fill job s",
    "agent fill job s",
]


def _ints(text: str) -> list[int]:
    return [int(part.replace("_", "")) for part in text.split(",") if part]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["keys", "fields", "caches", "all"])
    parser.add_argument("--backends", default="heap,rocksdb,forst")
    parser.add_argument("--keys", type=_ints, default=[100, 10_000, 1_000_000])
    parser.add_argument("--min-records", type=int, default=300_000)
    parser.add_argument(
        "--no-default-log", action="store_true", help="keys: the agent without a log only"
    )
    parser.add_argument("--fields", type=_ints, default=[10, 100, 1000])
    parser.add_argument("--field-keys", type=int, default=1000)
    parser.add_argument("--touches", type=int, default=30, help="records a key after its fill")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--caches", type=_ints, default=[0, 4096, 20_000], help="caches: state-cache-keys sizes"
    )
    parser.add_argument(
        "--managed-memory",
        help="taskmanager.memory.managed.size of every job (e.g. 512m); default: the "
        "MiniCluster's 128 MiB, which a million keys of the agent's state outgrow on RocksDB",
    )
    args = parser.parse_args(argv)
    global MANAGED_MEMORY
    MANAGED_MEMORY = args.managed_memory
    args.backends = args.backends.split(",")
    unknown = set(args.backends) - set(BACKENDS)
    if unknown:
        parser.error(f"unknown backends {sorted(unknown)}; known: {sorted(BACKENDS)}")
    enable_thread_mode()
    print("== scale: keys, memory per key, state backends ==")
    print(machine_summary(), flush=True)
    print(f"managed memory: {args.managed_memory or 'the MiniCluster default'}", flush=True)
    for backend in args.backends:
        print(f"verify on {backend}:")
        verify(backend_config(backend))
    if args.what in ("keys", "all"):
        keys_curve(args)
    if args.what in ("fields", "all"):
        fields_curve(args)
    if args.what == "caches":
        cache_sizes(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
