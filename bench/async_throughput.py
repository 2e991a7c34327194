"""Benchmark (b): throughput of async actions waiting on durable calls.

``bench.agents.SleepyAgent`` has one ``async`` action that awaits
``ctx.durable_execute_async(sleep_then, n, 0.2)``: a 0.2 s call standing in for an LLM or a
tool. For each in-flight limit L (``num_async_threads = max_in_flight = L``) the job runs
enough records to last about ``--target-seconds`` at the ideal rate L / 0.2 s (50 records
for L = 1), one record per key over max(1000, records) keys, and reports runs/s against
that ideal.

Each limit runs under three configurations: Flink's defaults (process mode), a small
bundle (``python.fn-execution.bundle.time`` / ``bundle.size``: timers set by the Python
worker fire in Java and come back as input), and ``python.execution-mode: thread``.

A second table runs several records per key (``--per-key``: records over keys, at L = 64):
a key's next record waits in ``pending_inputs`` behind its parked run, and at the end of a
bounded input the drain timers finish such runs one after another. A third runs the default
options (16 async threads, 32 in flight) over 2,000 calls of 50 ms on 200 keys. A fourth
(``--coroutine-limits``) makes the same calls as an async client makes them: an ``async
def`` function awaiting ``asyncio.sleep``, which runs on the engine's event loop instead of
holding a thread of the executor for its 0.2 s.

Runs/s are computed on the job's span: from the moment the agent begins taking records (its
first run notes the time) to the moment its last output leaves it (a pass-through map after
the agent notes it), so start-up and shut-down are not counted. Until 2026-11-25 the span
began when the first record left a pass-through map before the agent: that task runs ahead
while the agent's operator is still opening (in thread mode, starting every async thread:
about 0.28 s at L = 256), so the span counted that part of the start-up; it is still printed
("from input %"). The oldest figure, the wall time of ``env.execute()`` minus a start-up
baseline (the same agent over ten records with 0 s calls), is printed too: on a shared
machine a slow baseline swung it past 100%. With ``--repeat N`` every job runs N times (the
rounds one after another, so a burst of load hits one round) and the tables show medians.

    PYTHONPATH=/work/main .venv/bin/python -m bench.async_throughput [--limits 1,16,64,256]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from pyflink.common import Types
from pyflink.datastream import MapFunction

from bench import agents
from bench._common import (
    RECORD_TYPE,
    Timing,
    discard,
    enable_thread_mode,
    keyed_records,
    machine_summary,
    make_env,
    record_figure,
    table,
    timed,
)
from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.plan import compile_agent
from flink_agents.runtime import AgentOptions

SECONDS = 0.2
KEYS = 1000
LATER = ["% older spans: wall - start-up, from input"]
THREAD = {"python.execution-mode": "thread"}


class Stamp(MapFunction):
    """Passes records on, and writes when it saw the first and the last one to ``path``
    (``first last``, seconds since the epoch) when the job ends."""

    def __init__(self, path: str) -> None:
        self.path = path

    def open(self, runtime_context) -> None:
        self.first: float | None = None
        self.last = 0.0

    def map(self, value):
        now = time.time()
        if self.first is None:
            self.first = now
        self.last = now
        return value

    def close(self) -> None:
        if self.first is not None:
            with open(self.path, "w", encoding="ascii") as out:
                out.write(f"{self.first} {self.last}")


def _stamps(path: str, wait_s: float = 10.0) -> tuple[float, float]:
    """``first last`` from a ``Stamp``'s file. In process mode the Python worker (loopback:
    in this process) may close its operators just after ``execute`` returns: wait for it."""
    deadline = time.monotonic() + wait_s
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    with open(path, encoding="ascii") as stamps:
        first, last = stamps.read().split()
    return float(first), float(last)


def agent_stream(
    env,
    records: int,
    limit: int | None,
    seconds: float,
    keys: int,
    poll_ms: int | None,
    stamps: str | None = None,
    coroutine: bool = False,
):
    """The agent over ``records`` records; ``limit`` None keeps the default options. With
    ``stamps`` (a directory), its input and its outputs pass through ``Stamp`` maps that
    write ``in`` and ``out`` there, and its first run writes ``started``. ``coroutine``:
    its calls are ``async def`` (on the engine's event loop), not plain (on the executor)."""
    options: dict[str, object] = {}
    if limit is not None:
        options = {"num_async_threads": limit, "max_in_flight": limit}
    if poll_ms is not None:
        options["async_poll_interval_ms"] = poll_ms
    environment = AgentsExecutionEnvironment.get_execution_environment(env, **options)
    plan = compile_agent(agents.SleepyAgent)
    config = {**plan.config, "seconds": seconds, "coroutine": coroutine}
    if stamps is not None:
        config["started_file"] = os.path.join(stamps, "started")
    plan = plan.model_copy(update={"config": config})
    source = keyed_records(env, records, keys)
    if stamps is not None:
        source = source.map(Stamp(os.path.join(stamps, "in")), output_type=RECORD_TYPE)
    outputs = (
        environment.from_datastream(source, key_selector=agents.record_key, key_type=Types.STRING())
        .apply(plan)
        .to_datastream()
    )
    if stamps is not None:
        outputs = outputs.map(Stamp(os.path.join(stamps, "out")))
    return outputs


def agent_job(
    records: int,
    limit: int | None,
    seconds: float,
    config: dict[str, str],
    poll_ms: int | None = None,
    keys: int | None = None,
    coroutine: bool = False,
) -> tuple[Timing, float, float]:
    """``records`` runs over ``keys`` keys (default: one record per key, at least 1000 keys):
    the job's timing, its span in seconds (the agent's start to its last output) and the
    older span (first input to last output, see the module docstring)."""
    env = make_env(config=config)
    keys = keys or max(KEYS, records)
    with tempfile.TemporaryDirectory(prefix="async-stamps-") as stamps:
        discard(agent_stream(env, records, limit, seconds, keys, poll_ms, stamps, coroutine))
        timing = timed(env, f"async L={limit}")
        first_in, _ = _stamps(os.path.join(stamps, "in"))
        _, last_out = _stamps(os.path.join(stamps, "out"))
        with open(os.path.join(stamps, "started"), encoding="ascii") as started:
            agent_started = float(started.read())
    produced = agents.COUNTS.pop("async", 0)
    if produced != records and config.get("python.execution-mode") != "thread":
        print(f"  WARNING: {produced} outputs for {records} records", flush=True)
    return timing, last_out - agent_started, last_out - first_in


def verify(config: dict[str, str], poll_ms: int | None) -> None:
    """Every record's run ends once, in order per key (collected: not used for figures)."""
    records, keys = 300, 100
    env = make_env(config=config)
    stream = agent_stream(env, records, 16, 0.01, keys, poll_ms)
    with stream.execute_and_collect() as results:
        outputs = list(results)
    per_key: dict[str, list[int]] = {}
    for key, n in outputs:
        per_key.setdefault(key, []).append(n)
    ok = sorted(n for _, n in outputs) == list(range(records)) and all(
        ns == sorted(ns) for ns in per_key.values()
    )
    print(f"  verify: {len(outputs)} outputs for {records} records, {'ok' if ok else 'WRONG'}")
    if not ok:
        raise SystemExit("the async agent produced wrong results")
    agents.COUNTS.clear()


def records_for(limit: int, target_seconds: float, min_records: int) -> int:
    if limit == 1:
        return 50
    return max(min_records, round(target_seconds * limit / SECONDS))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limits", default="1,16,64,256")
    parser.add_argument("--target-seconds", type=float, default=3.0)
    parser.add_argument("--min-records", type=int, default=200)
    parser.add_argument("--small-bundle-time", type=int, default=10, help="ms")
    parser.add_argument("--small-bundle-size", type=int, default=100, help="elements")
    parser.add_argument("--poll-ms", type=int, help="agent option async-poll-interval-ms")
    parser.add_argument(
        "--configs",
        default="defaults,small-bundle,thread",
        help="comma-separated: defaults, small-bundle, thread",
    )
    parser.add_argument(
        "--per-key",
        default="1000/1000,1100/1000,3000/500",
        help="several records per key: comma-separated records/keys, at L=64 ('' to skip)",
    )
    parser.add_argument(
        "--coroutine-limits",
        default="64,256",
        help="in-flight limits at which the calls also run as async def functions, as an "
        "async client's are ('' to skip)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="rounds; the tables show medians")
    parser.add_argument(
        "--defaults-records",
        type=int,
        default=2000,
        help="records of the default-options case: 50 ms calls, 10 records per key (0 to skip)",
    )
    args = parser.parse_args(argv)
    limits = [int(x) for x in args.limits.split(",")]
    small = {
        "python.fn-execution.bundle.time": str(args.small_bundle_time),
        "python.fn-execution.bundle.size": str(args.small_bundle_size),
    }
    small_label = f"process, bundle {args.small_bundle_time} ms/{args.small_bundle_size}"
    available = {
        "defaults": ("process, defaults", {"python.execution-mode": "process"}),
        "small-bundle": (small_label, {**small, "python.execution-mode": "process"}),
        "thread": ("thread mode", THREAD),
    }
    configs = [(name, *available[name]) for name in args.configs.split(",")]
    if any(config is THREAD for _, _, config in configs):
        enable_thread_mode()

    print("== (b) async throughput: durable calls of 0.2 s, in-flight limits ==")
    print(machine_summary())
    print(
        f"call={SECONDS}s keys=max({KEYS}, records) parallelism=1 sink=DiscardingSink "
        f"poll-interval={args.poll_ms or 'default'} ms",
        flush=True,
    )

    per_key = [tuple(int(n) for n in pair.split("/")) for pair in args.per_key.split(",") if pair]
    coroutine_limits = [int(x) for x in args.coroutine_limits.split(",") if x]
    rows, drain_rows, default_rows, coroutine_rows = [], [], [], []
    for name, label, config in configs:
        verify(config, args.poll_ms)  # also the warm-up
        jobs: list[tuple[str, int, int | None, float, int | None]] = []  # name, runs, L, s, keys
        for limit in limits:
            n = records_for(limit, args.target_seconds, args.min_records)
            jobs.append(("limit", n, limit, SECONDS, None))
        for records, keys in per_key:
            jobs.append(("per-key", records, 64, SECONDS, keys))
        if args.defaults_records:
            n = args.defaults_records
            jobs.append(("defaults", n, None, 0.05, n // 10))
        for limit in coroutine_limits:
            n = records_for(limit, args.target_seconds, args.min_records)
            jobs.append(("async def", n, limit, SECONDS, None))
        startups: list[float] = []
        nets: dict[int, list[float]] = {i: [] for i in range(len(jobs))}
        walls: dict[int, list[float]] = {i: [] for i in range(len(jobs))}
        spans: dict[int, list[float]] = {i: [] for i in range(len(jobs))}
        input_spans: dict[int, list[float]] = {i: [] for i in range(len(jobs))}
        for round_ in range(args.repeat):
            startup = agent_job(10, 1, 0.0, config, args.poll_ms)[0].wall
            startups.append(startup)
            print(f"  [{label}] round {round_ + 1}: start-up baseline {startup:.2f} s", flush=True)
            for i, (kind, n, limit, seconds, keys) in enumerate(jobs):
                t, span, input_span = agent_job(
                    n, limit, seconds, config, args.poll_ms, keys, coroutine=kind == "async def"
                )
                net = max(t.wall - startup, 1e-9)
                walls[i].append(t.wall)
                nets[i].append(net)
                spans[i].append(span)
                input_spans[i].append(input_span)
                ideal = _ideal(limit, seconds)
                print(
                    f"  [{label}] {kind} L={limit or 'default'}: {n} runs over "
                    f"{keys or max(KEYS, n)} keys, calls of {seconds * 1000:.0f} ms: "
                    f"span {span:.2f} s: {n / span:.1f} runs/s, "
                    f"{100 * n / span / ideal:.0f}% of ideal (from input "
                    f"{100 * n / input_span / ideal:.0f}%); {t.wall:.2f} s wall "
                    f"({net:.2f} s net: {100 * n / net / ideal:.0f}%); CPU {t.jvm_cpu:.1f} s JVM",
                    flush=True,
                )
        print(f"  [{label}] start-up baselines: {', '.join(f'{x:.2f}' for x in startups)} s")
        for i, (kind, n, limit, seconds, keys) in enumerate(jobs):
            wall, span = statistics.median(walls[i]), statistics.median(spans[i])
            rate = statistics.median(n / x for x in spans[i])
            ideal = _ideal(limit, seconds)
            percent = f"{100 * rate / ideal:.0f}%"
            spread = "-".join(f"{100 * n / x / ideal:.0f}" for x in (max(spans[i]), min(spans[i])))
            net = f"{100 * statistics.median(n / x for x in nets[i]) / ideal:.0f}%"
            net += f", {100 * statistics.median(n / x for x in input_spans[i]) / ideal:.0f}%"
            detail = f"{label}, {n:,} runs over {keys or max(KEYS, n):,} keys, calls of "
            detail += f"{seconds * 1000:.0f} ms, median of {args.repeat}"
            if kind == "limit":
                rows.append((label, limit, n, wall, span, rate, ideal, percent, spread, net))
                record_figure(f"async.{name}.L{limit}", rate / ideal, detail)
            elif kind == "async def":
                coroutine_rows.append(
                    (label, limit, n, wall, span, rate, ideal, percent, spread, net)
                )
                record_figure(f"async.{name}.coroutine.L{limit}", rate / ideal, detail)
            elif kind == "per-key":
                drain_rows.append(
                    (label, n, keys, limit, wall, span, rate, ideal, percent, spread, net)
                )
                record_figure(f"async.{name}.per_key.{n}/{keys}", rate / ideal, detail)
            else:
                default_rows.append((label, n, keys, wall, span, rate, ideal, percent, spread, net))
                record_figure(f"async.{name}.default_options", rate / ideal, detail)
    print()
    print("one record per key:")
    headers = ["configuration", "in-flight L", "runs", "wall s", "span s", "runs/s"]
    print(table([*headers, "ideal L/0.2s", "% of ideal", "range %", *LATER], rows))
    if drain_rows:
        print()
        print("several records per key (the later records of a key queue behind its parked run):")
        headers = ["configuration", "runs", "keys", "in-flight L", "wall s", "span s", "runs/s"]
        print(table([*headers, "ideal L/0.2s", "% of ideal", "range %", *LATER], drain_rows))
    if default_rows:
        print()
        print("default options (16 async threads, 32 in flight), 50 ms calls, 10 records per key:")
        headers = ["configuration", "runs", "keys", "wall s", "span s", "runs/s"]
        print(
            table(
                [*headers, "ideal 16/0.05s", "% of ideal", "range %", *LATER],
                default_rows,
            )
        )
    if coroutine_rows:
        print()
        print(
            "async def calls (an async client's, on the engine's event loop), one record per key:"
        )
        headers = ["configuration", "in-flight L", "runs", "wall s", "span s", "runs/s"]
        print(table([*headers, "ideal L/0.2s", "% of ideal", "range %", *LATER], coroutine_rows))
    if args.repeat > 1:
        print(f"(medians of {args.repeat} rounds; range: the slowest and fastest round)")
    return 0


def _ideal(limit: int | None, seconds: float) -> float:
    """Runs/s at min(num-async-threads, max-in-flight) calls in flight, each ``seconds``."""
    options = AgentOptions() if limit is None else None
    slots = limit if options is None else min(options.num_async_threads, options.max_in_flight)
    return slots / seconds


if __name__ == "__main__":
    sys.exit(main())
