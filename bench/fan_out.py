"""Benchmark: parallel actions within a run (issue 13, goal 4).

``bench.agents.FanOutAgent`` fans its input out to three ``async def`` actions, each
awaiting one durable call of ``--seconds`` (0.2 s): a run should take about one call, not
three. Runs of one key are strictly sequential, so ``--runs`` records of a single key take
``runs`` run latencies one after another.

- Local runner: the median wall time of ``runner.run(key, record)``.
- MiniCluster (thread mode, the default; ``--modes thread,process``): the wall time of the
  job minus a start-up baseline (the same job with 0 s calls), divided by the runs.

Each with ``parallel-actions`` on (the default) and off (one action at a time), in the same
process, so the ratio is measured in one run.

    PYTHONPATH=/work/main .venv/bin/python -m bench.fan_out [--runs 10] [--seconds 0.2]
"""

from __future__ import annotations

import argparse
import statistics
import time

from pyflink.common import Types

from bench import agents
from bench._common import (
    discard,
    enable_thread_mode,
    machine_summary,
    make_env,
    record_figure,
    table,
    timed,
)
from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.plan import compile_agent
from flink_agents.runtime import AgentOptions, LocalRunner


def plan_for(seconds: float):
    plan = compile_agent(agents.FanOutAgent)
    return plan.model_copy(update={"config": {**plan.config, "seconds": seconds}})


def local_latency(runs: int, seconds: float, parallel: bool) -> float:
    runner = LocalRunner(plan_for(seconds), options=AgentOptions(parallel_actions=parallel))
    took = []
    for n in range(runs):
        started = time.perf_counter()
        outputs = runner.run("key", ("key", n))
        took.append(time.perf_counter() - started)
        assert len(outputs) == 3, outputs
    return statistics.median(took)


def flink_wall(runs: int, seconds: float, parallel: bool, mode: str) -> float:
    env = make_env(config={"python.execution-mode": mode})
    environment = AgentsExecutionEnvironment.get_execution_environment(
        env, parallel_actions=parallel
    )
    records = env.from_collection(
        [("key", n) for n in range(runs)],
        type_info=Types.TUPLE([Types.STRING(), Types.LONG()]),
    )
    stream = (
        environment.from_datastream(records, key_selector=agents.record_key)
        .apply(plan_for(seconds))
        .to_datastream()
    )
    discard(stream)
    agents.COUNTS.pop("fan-out", None)
    wall = timed(env, f"fan-out parallel={parallel}").wall
    produced = agents.COUNTS.pop("fan-out", 0)
    # In thread mode the actions run in the JVM's interpreter, whose counters this is not.
    if mode != "thread" and produced != 3 * runs:
        print(f"  WARNING: {produced} outputs for {runs} runs", flush=True)
    return wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=0.2)
    parser.add_argument("--modes", default="thread", help="comma-separated: thread, process")
    parser.add_argument("--repeat", type=int, default=3, help="MiniCluster jobs per figure")
    args = parser.parse_args(argv)
    enable_thread_mode()
    print("== fan-out: three async actions of one event, each one durable call ==")
    print(machine_summary())
    print(f"call={args.seconds}s runs={args.runs} (one key) parallelism=1", flush=True)
    rows = []
    for parallel in (True, False):
        latency = local_latency(args.runs, args.seconds, parallel)
        rows.append(("local runner", parallel, latency, latency / args.seconds))
        if parallel:
            record_figure("fan_out.local", latency / args.seconds, f"{args.runs} runs")
        print(f"  local parallel={parallel}: {latency * 1000:.0f} ms per run", flush=True)
    for mode in args.modes.split(","):
        startup = statistics.median(
            flink_wall(args.runs, 0.0, True, mode) for _ in range(args.repeat)
        )
        for parallel in (True, False):
            wall = statistics.median(
                flink_wall(args.runs, args.seconds, parallel, mode) for _ in range(args.repeat)
            )
            latency = (wall - startup) / args.runs
            rows.append((f"MiniCluster, {mode} mode", parallel, latency, latency / args.seconds))
            if parallel:
                detail = f"{args.runs} runs, median of {args.repeat} jobs"
                record_figure(f"fan_out.{mode}", latency / args.seconds, detail)
            print(
                f"  {mode} parallel={parallel}: {wall:.2f} s wall, start-up {startup:.2f} s: "
                f"{latency * 1000:.0f} ms per run",
                flush=True,
            )
    print()
    print(
        table(
            ["runner", "parallel-actions", "run latency (s)", "in calls of one action"],
            [(r, p, f"{lat:.3f}", f"{x:.2f}") for r, p, lat, x in rows],
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
