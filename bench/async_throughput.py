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

A second table runs a few records per key (1000 keys, some with two records): a key's next
record waits in ``pending_inputs`` behind its parked run, and at the end of a bounded input
the drain timers finish such runs one after another.

Runs/s are computed on the wall time of ``env.execute()`` minus a start-up baseline: the
same agent over ten records with a 0 s call, timed the same way.

    PYTHONPATH=/work/main .venv/bin/python -m bench.async_throughput [--limits 1,16,64,256]
"""

from __future__ import annotations

import argparse
import sys

from pyflink.common import Types

from bench import agents
from bench._common import (
    Timing,
    discard,
    enable_thread_mode,
    keyed_records,
    machine_summary,
    make_env,
    table,
    timed,
)
from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.plan import compile_agent
from flink_agents.runtime import AgentOptions

SECONDS = 0.2
KEYS = 1000
THREAD = {"python.execution-mode": "thread"}


def agent_stream(
    env, records: int, limit: int | None, seconds: float, keys: int, poll_ms: int | None
):
    """The agent over ``records`` records; ``limit`` None keeps the default options."""
    options: dict[str, object] = {}
    if limit is not None:
        options = {"num_async_threads": limit, "max_in_flight": limit}
    if poll_ms is not None:
        options["async_poll_interval_ms"] = poll_ms
    environment = AgentsExecutionEnvironment.get_execution_environment(env, **options)
    plan = compile_agent(agents.SleepyAgent)
    plan = plan.model_copy(update={"config": {**plan.config, "seconds": seconds}})
    return (
        environment.from_datastream(
            keyed_records(env, records, keys),
            key_selector=agents.record_key,
            key_type=Types.STRING(),
        )
        .apply(plan)
        .to_datastream()
    )


def agent_job(
    records: int,
    limit: int | None,
    seconds: float,
    config: dict[str, str],
    poll_ms: int | None = None,
    keys: int | None = None,
) -> Timing:
    """``records`` runs over ``keys`` keys (default: one record per key, at least 1000 keys)."""
    env = make_env(config=config)
    keys = keys or max(KEYS, records)
    discard(agent_stream(env, records, limit, seconds, keys, poll_ms))
    timing = timed(env, f"async L={limit}")
    produced = agents.COUNTS.pop("async", 0)
    if produced != records and config.get("python.execution-mode") != "thread":
        print(f"  WARNING: {produced} outputs for {records} records", flush=True)
    return timing


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
        "--drain-records",
        type=int,
        default=1100,
        help="records of the several-per-key case over 1000 keys (0 to skip)",
    )
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
    configs = [available[name] for name in args.configs.split(",")]
    if any(config is THREAD for _, config in configs):
        enable_thread_mode()

    print("== (b) async throughput: durable calls of 0.2 s, in-flight limits ==")
    print(machine_summary())
    print(
        f"call={SECONDS}s keys=max({KEYS}, records) parallelism=1 sink=DiscardingSink "
        f"poll-interval={args.poll_ms or 'default'} ms",
        flush=True,
    )

    rows, drain_rows, default_rows = [], [], []
    for label, config in configs:
        verify(config, args.poll_ms)  # also the warm-up
        startup = agent_job(10, 1, 0.0, config, args.poll_ms).wall
        print(f"  [{label}] start-up baseline (10 records, 0 s calls): {startup:.2f} s", flush=True)
        for limit in limits:
            n = records_for(limit, args.target_seconds, args.min_records)
            t = agent_job(n, limit, SECONDS, config, args.poll_ms)
            net = max(t.wall - startup, 1e-9)
            ideal, rate = limit / SECONDS, n / net
            percent = f"{100 * rate / ideal:.0f}%"
            print(
                f"  [{label}] L={limit}: {n} runs in {t.wall:.2f} s wall ({net:.2f} s net): "
                f"{rate:.1f} runs/s, {percent} of ideal; CPU {t.py_cpu:.1f} s Python, "
                f"{t.jvm_cpu:.1f} s JVM",
                flush=True,
            )
            rows.append((label, limit, n, t.wall, net, rate, ideal, percent))
        if args.drain_records:
            n, limit = args.drain_records, 64
            for records in (KEYS, n):
                t = agent_job(records, limit, SECONDS, config, args.poll_ms, keys=KEYS)
                net = max(t.wall - startup, 1e-9)
                print(
                    f"  [{label}] {records} records over {KEYS} keys, L={limit}: "
                    f"{t.wall:.2f} s wall, {records / net:.1f} runs/s",
                    flush=True,
                )
                drain_rows.append(
                    (label, records, records - KEYS, limit, t.wall, net, records / net)
                )
        if args.defaults_records:
            # Default options (16 async threads, 256 in flight): the ideal is 16 / 50 ms.
            n, keys, seconds = args.defaults_records, args.defaults_records // 10, 0.05
            ideal = AgentOptions().num_async_threads / seconds
            t = agent_job(n, None, seconds, config, args.poll_ms, keys=keys)
            net = max(t.wall - startup, 1e-9)
            percent = f"{100 * n / net / ideal:.0f}%"
            print(
                f"  [{label}] default options, {n} calls of {seconds * 1000:.0f} ms over {keys} "
                f"keys: {t.wall:.2f} s wall, {n / net:.1f} runs/s, {percent} of ideal",
                flush=True,
            )
            default_rows.append((label, n, keys, t.wall, net, n / net, ideal, percent))
    print()
    print("one record per key:")
    headers = ["configuration", "in-flight L", "runs", "wall s", "net s", "runs/s (net)"]
    print(table([*headers, "ideal L/0.2s", "% of ideal"], rows))
    if drain_rows:
        print()
        print(f"a few records per key ({KEYS} keys; the extra records queue behind parked runs):")
        headers = ["configuration", "runs", "keys with 2 runs", "in-flight L", "wall s", "net s"]
        print(table([*headers, "runs/s (net)"], drain_rows))
    if default_rows:
        print()
        print("default options (16 async threads), 50 ms calls, 10 records per key:")
        headers = ["configuration", "runs", "keys", "wall s", "net s", "runs/s (net)"]
        print(table([*headers, "ideal 16/0.05s", "% of ideal"], default_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
