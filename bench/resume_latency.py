"""Benchmark (c): how long a run waits to go on after its durable call has ended.

``bench.agents.LatencyAgent`` has one ``async`` action that awaits one durable call of
``--call-ms`` (``timed_sleep``). Records come at a steady rate (``Paced``, a key each), below
what the agent's default options can take (16 async threads: 16 / 0.05 s = 320 calls a
second for calls of 50 ms), and Flink's buffer timeout is ``--buffer-timeout-ms`` (1 ms: at
the default 100 ms the records would reach the agent in bursts). For each run the output
holds four times, all ``time.monotonic()`` in the one process that runs the agent:

    start lag    the action reaching the call -> the call beginning on its thread
    resume lag   the call ending -> the action going on after it (the run resumed)

An agent at these rates has free places for calls, so neither should take more than a few
milliseconds: a parked run is resumed by the next callback of any key, or by its poll.
Percentiles are over every run but the first tenth (the action's latency is learnt then).
In process mode (``--mode process``) PyFlink hands records to a Python worker in bundles,
and the worker passes on what a bundle made when the bundle ends: with its default bundles
the paced step's outputs (a bundle's worth of sleeps) reached the agent as one burst, whose
calls then waited for the 16 threads. So process mode runs with one record per bundle
(``--bundle-size``, default 1 there), as an input that trickles in from a source would.

    PYTHONPATH=/work/main .venv/bin/python -m bench.resume_latency [--rates 50,200,300]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from pyflink.common import Types

from bench import agents
from bench._common import (
    RECORD_TYPE,
    discard,
    enable_thread_mode,
    machine_summary,
    make_env,
    record_figure,
    sequence,
    table,
    timed,
)
from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.plan import compile_agent
from flink_agents.runtime import AgentOptions

THREADS = AgentOptions().num_async_threads  # the default options take that many calls at once


def latency_job(
    rate: float,
    records: int,
    call_s: float,
    config: dict[str, str],
    buffer_timeout_ms: int,
    **options: object,
) -> list[tuple[float, ...]]:
    """One job at ``rate`` records a second; each run's four times, in output order."""
    env = make_env(config=config)
    env.set_buffer_timeout(buffer_timeout_ms)
    records_in = sequence(env, records).map(agents.Paced(1.0 / rate), output_type=RECORD_TYPE)
    environment = AgentsExecutionEnvironment.get_execution_environment(env, **options)
    plan = compile_agent(agents.LatencyAgent)
    plan = plan.model_copy(update={"config": {**plan.config, "seconds": call_s}})
    outputs = (
        environment.from_datastream(
            records_in, key_selector=agents.record_key, key_type=Types.STRING()
        )
        .apply(plan)
        .to_datastream()
    )
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "runs.txt")
        discard(outputs.map(agents.AppendLines(path), output_type=Types.INT()))
        timed(env, f"resume latency at {rate:g}/s")
        # A process-mode worker (loopback: this process) may close its operators just
        # after the job is reported finished.
        deadline = time.monotonic() + 10
        while _lines(path) < records and time.monotonic() < deadline:
            time.sleep(0.05)
        with open(path, encoding="ascii") as lines:
            return [tuple(map(float, line.split())) for line in lines]


def _lines(path: str) -> int:
    if not os.path.exists(path):
        return 0
    with open(path, encoding="ascii") as lines:
        return sum(1 for _ in lines)


def _percentiles(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    pick = lambda share: ordered[min(len(ordered) - 1, int(len(ordered) * share))]  # noqa: E731
    return pick(0.5), pick(0.9), pick(0.99)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="50,200,300", help="records a second, one job each")
    parser.add_argument("--seconds", type=float, default=3.0, help="of input per job")
    parser.add_argument("--call-ms", type=float, default=50.0)
    parser.add_argument("--buffer-timeout-ms", type=int, default=1)
    parser.add_argument("--mode", choices=["thread", "process"], default="thread")
    parser.add_argument("--action-log", help="the agent's action_log option (default: its own)")
    parser.add_argument(
        "--bundle-time-ms", type=int, help="python.fn-execution.bundle.time (process mode)"
    )
    parser.add_argument(
        "--bundle-size",
        type=int,
        help="python.fn-execution.bundle.size (process mode; default 1: see the docstring)",
    )
    args = parser.parse_args(argv)
    options = {} if args.action_log is None else {"action_log": args.action_log}
    config = {"python.execution-mode": args.mode}
    if args.bundle_time_ms is not None:
        config["python.fn-execution.bundle.time"] = str(args.bundle_time_ms)
    if args.mode == "process" and args.bundle_size is None:
        args.bundle_size = 1
    if args.bundle_size is not None:
        config["python.fn-execution.bundle.size"] = str(args.bundle_size)
    if args.mode == "thread":
        enable_thread_mode()
    call_s = args.call_ms / 1000
    capacity = THREADS / call_s

    print("== (c) resume latency: durable calls of a steady input, below capacity ==")
    print(machine_summary())
    print(
        f"call={args.call_ms:g} ms, default options ({THREADS} async threads: {capacity:.0f} "
        f"calls/s), one key per record, parallelism 1, {args.mode} mode, buffer timeout "
        f"{args.buffer_timeout_ms} ms",
        f"flink-config={config}",
        flush=True,
    )
    latency_job(20, 20, call_s, config, args.buffer_timeout_ms, **options)  # warm-up
    rows = []
    for rate in (float(r) for r in args.rates.split(",") if r):
        records = max(20, round(rate * args.seconds))
        runs = latency_job(rate, records, call_s, config, args.buffer_timeout_ms, **options)
        runs = runs[len(runs) // 10 :]
        starts = [(began - reached) * 1000 for reached, began, _, _ in runs]
        resumes = [(resumed - ended) * 1000 for _, _, ended, resumed in runs]
        calls = [(ended - began) * 1000 for _, began, ended, _ in runs]
        start, resume = _percentiles(starts), _percentiles(resumes)
        print(
            f"  {rate:g} records/s: {len(runs)} runs, start lag p50 {start[0]:.1f} ms, "
            f"resume lag p50 {resume[0]:.1f} ms, p90 {resume[1]:.1f} ms",
            flush=True,
        )
        rows.append(
            (
                f"{rate:g}",
                f"{rate / capacity:.0%}",
                len(runs),
                f"{_percentiles(calls)[0]:.1f}",
                *(f"{v:.1f}" for v in start),
                *(f"{v:.1f}" for v in resume),
            )
        )
        detail = f"{args.mode} mode, {rate:g} records/s, calls of {args.call_ms:g} ms"
        record_figure(f"latency.{args.mode}.resume_p50_ms.{rate:g}", resume[0], detail)
    print()
    headers = ["records/s", "of capacity", "runs", "call ms p50", "start lag ms p50", "p90",
               "p99", "resume lag ms p50", "p90", "p99"]  # fmt: skip
    print(table(headers, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
