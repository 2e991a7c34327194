"""Benchmark (a): state throughput of the agent dispatcher against raw PyFlink.

The agent (``bench.agents.CounterAgent``) runs two actions per record: the first reads a
counter from short-term memory, writes it back +1 and sends an event; the second reads and
writes a running sum and emits an ``OutputEvent``. The raw job (``bench.agents.RawCounter``)
is a ``KeyedProcessFunction`` doing the same gets and puts on a ``MapState[str, pickled]``
and emitting one output. Both read the same input (a Java number sequence mapped to
``(key, n)`` tuples over 128 keys) and write to a discarding sink, at parallelism 1.

Each job is timed end to end around ``env.execute()``. Start-up is removed by subtracting
an empty job (source and discarding sink only) timed the same way; a second figure also
subtracts the Python operator's own start-up (the raw job over 128 records). CPU seconds
are those of this process (client + loopback Python worker) and of the MiniCluster JVM.
``--mode`` sets ``python.execution-mode`` for every job: ``thread`` (the default of jobs built
through ``AgentsExecutionEnvironment``; Python inside the JVM, its CPU then counts as JVM CPU)
or ``process``. The agent runs three times: with its default action log (SQLite), with that
log recording every action (``action_log_record="all"``, the audit option: a record per
action, and no fast path for plain actions) and with ``action_log="none"``, so the log's
costs are ratios of the same run (``--no-record-all`` leaves the second out).

    PYTHONPATH=/work/main .venv/bin/python -m bench.state_throughput [--records 200000]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from pyflink.common import Types

from bench import agents
from bench._common import (
    Timing,
    counter_agent_stream,
    discard,
    enable_thread_mode,
    key_stream,
    keyed_records,
    machine_summary,
    make_env,
    median_run,
    raw_counter_stream,
    record_figure,
    sequence,
    table,
    timed,
)

GOAL = 0.7
EMPTY, STARTUP = "empty (source -> sink)", "python start-up (raw, 128 records)"
PASSTHROUGH, RAW, CODE, AGENT, AGENT_NO_LOG, AGENT_PG, AGENT_ALL, AGENT_TTL = (
    "keyed passthrough, no state",
    "raw KeyedProcessFunction + MapState",
    "the agent's action code alone, no framework",
    "agent (2 actions), default action log",
    "agent (2 actions), action_log=none",
    "agent (2 actions), PostgreSQL action log",
    "agent (2 actions), default log, action_log_record=all",
    "agent (2 actions), action_log=none, short-term-memory-ttl 1 h",
)


def empty_job(records: int, config: dict[str, str]) -> Timing:
    env = make_env(config=config)
    discard(sequence(env, records))
    return timed(env, "empty")


def passthrough_job(records: int, config: dict[str, str]) -> Timing:
    env = make_env(config=config)
    stream = key_stream(keyed_records(env, records, agents.NUM_KEYS))
    discard(stream.process(agents.PassThrough(), output_type=Types.PICKLED_BYTE_ARRAY()))
    return _checked(timed(env, "passthrough"), "passthrough", records, config)


def raw_job(records: int, config: dict[str, str]) -> Timing:
    env = make_env(config=config)
    discard(_raw_stream(env, records))
    return _checked(timed(env, "raw MapState"), "raw", records, config)


def code_job(records: int, config: dict[str, str]) -> Timing:
    env = make_env(config=config)
    discard(_code_stream(env, records, config))
    timing = timed(env, "action code")
    agents.COUNTS["code"] = agents.COUNTS.pop("agent", 0)  # counted by the action
    return _checked(timing, "code", records, config)


def agent_job(records: int, config: dict[str, str], **options) -> Timing:
    env = make_env(config=config)
    discard(_agent_stream(env, records, **options))
    return _checked(timed(env, "agent"), "agent", records, config)


def _checked(timing: Timing, name: str, records: int, config: dict[str, str]) -> Timing:
    """Every record must have produced its output (counted in-process: loopback mode only)."""
    produced = agents.COUNTS.pop(name, 0)
    if produced != records and config.get("python.execution-mode") != "thread":
        print(f"  WARNING: {name} produced {produced} outputs for {records} records", flush=True)
    return timing


def verify(config: dict[str, str], per_key: int = 10) -> None:
    """Check both jobs' outputs on a small input (collected: never used for figures)."""
    n = per_key * agents.NUM_KEYS
    expected = {
        f"k{k}": (per_key, sum(range(k, n, agents.NUM_KEYS))) for k in range(agents.NUM_KEYS)
    }
    builds = (
        ("raw", _raw_stream),
        ("agent", _agent_stream),
        ("action code", lambda env, n: _code_stream(env, n, config)),
    )
    for name, build in builds:
        env = make_env(config=config)
        with build(env, n).execute_and_collect() as results:
            outputs = list(results)
        final = {}
        for key, count, total in outputs:
            final[key] = max(final.get(key, (0, 0)), (count, total))
        status = "ok" if len(outputs) == n and final == expected else "WRONG"
        print(f"  verify {name}: {len(outputs)} outputs for {n} records, final values {status}")
        if status != "ok":
            raise SystemExit(f"{name} job produced wrong results")
    agents.COUNTS.clear()


def verify_record_all(config: dict[str, str], per_key: int = 10) -> None:
    """Check that with ``action_log_record="all"`` the agent's outputs are the same and
    that the log holds a record of each of its actions (small input; never timed)."""
    import tempfile

    from flink_agents.runtime.action_log import open_action_log

    n = per_key * agents.NUM_KEYS
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite://{directory}/log.db"
        outputs = {}
        for record in ("restore", "all"):
            env = make_env(config=config)
            stream = _agent_stream(
                env, n, action_log=url, action_log_job=record, action_log_record=record
            )
            with stream.execute_and_collect() as results:
                outputs[record] = sorted(results)
        with open_action_log(url) as log:
            counts = {record: log.count(record) for record in ("restore", "all")}
    ok = outputs["all"] == outputs["restore"] and len(outputs["all"]) == n
    ok = ok and counts == {"restore": 0, "all": 2 * n}
    status = "ok" if ok else "WRONG"
    print(f"  verify record-all: {len(outputs['all'])} outputs, {counts} records, {status}")
    if not ok:
        raise SystemExit("the agent with action_log_record=all produced wrong results")


def _raw_stream(env, records: int):
    return raw_counter_stream(env, records, agents.NUM_KEYS)


def _code_stream(env, records: int, config: dict[str, str]):
    stream = key_stream(keyed_records(env, records, agents.NUM_KEYS))
    thread_mode = config.get("python.execution-mode") == "thread"
    return stream.process(
        agents.ActionCodeOnly(thread_mode), output_type=Types.PICKLED_BYTE_ARRAY()
    )


def _agent_stream(env, records: int, **options):
    return counter_agent_stream(env, records, agents.NUM_KEYS, **options)


def flink_config(args: argparse.Namespace) -> dict[str, str]:
    config: dict[str, str] = {}
    if args.bundle_size:
        config["python.fn-execution.bundle.size"] = str(args.bundle_size)
    if args.bundle_time:
        config["python.fn-execution.bundle.time"] = str(args.bundle_time)
    config["python.execution-mode"] = args.mode
    if args.mode == "thread":
        enable_thread_mode()
    return config


def report(n: int, timings: dict[str, Timing], mode: str = "thread", repeat: int = 1) -> float:
    """Print the table and ratios (and record the headline figures, ``record_figure``);
    returns the agent/raw ratio net of the empty job."""
    empty, startup = timings[EMPTY].wall, timings[STARTUP].wall
    rows = []
    for name, t in timings.items():
        cpu_us = f"{(t.py_cpu + t.jvm_cpu) / n * 1e6:.0f}" if name not in (EMPTY, STARTUP) else ""
        if name in (EMPTY, STARTUP):
            rows.append((name, t.wall, t.py_cpu, t.jvm_cpu, "", "", "", "", cpu_us))
            continue
        net, net_py = t.wall - empty, t.wall - startup
        rows.append(
            (name, t.wall, t.py_cpu, t.jvm_cpu, net, n / t.wall, n / net, n / net_py, cpu_us)
        )
    headers = [
        "job",
        "wall s",
        "py CPU s",
        "JVM CPU s",
        "wall-empty s",
        "rec/s wall",
        "rec/s net",
        "rec/s net of py start",
        "CPU us/rec",
    ]
    print(table(headers, rows))
    raw, agent = timings[RAW].wall, timings[AGENT].wall
    ratio = (raw - empty) / (agent - empty)
    no_log = timings[AGENT_NO_LOG].wall
    print()
    without_log = (raw - empty) / (no_log - empty)
    log_cost = (no_log - empty) / (agent - empty)
    detail = f"{n:,} records, {mode} mode, median of {repeat}"
    print(f"ratio agent without log/raw, net of empty:  {without_log:.2f}   (goal >= {GOAL})")
    print(f"ratio agent default log/no log, net:        {log_cost:.2f}   (goal >= 0.9)")
    record_figure(f"state.{mode}.no_log_over_raw", without_log, detail)
    record_figure(f"state.{mode}.log_over_no_log", log_cost, detail)
    record_figure(f"state.{mode}.defaults_rec_s", n / (agent - empty), detail)
    if AGENT_PG in timings:
        pg_cost = (no_log - empty) / (timings[AGENT_PG].wall - empty)
        print(f"ratio agent PostgreSQL log/no log, net:     {pg_cost:.2f}   (goal >= 0.8)")
        record_figure(f"state.{mode}.pg_over_no_log", pg_cost, detail)
    if AGENT_ALL in timings:
        every = timings[AGENT_ALL].wall - empty
        all_cost, all_raw = (no_log - empty) / every, (raw - empty) / every
        print(f"ratio agent record-all log/no log, net:     {all_cost:.2f}   (the audit option)")
        print(f"ratio agent record-all log/default log, net: {(agent - empty) / every:.2f}")
        print(f"ratio agent record-all log/raw, net:        {all_raw:.2f}")
        print(
            "record-all's own time, us/record net:        "
            f"{(timings[AGENT_ALL].wall - agent) / n * 1e6:.1f}   (over the default log)"
        )
        record_figure(f"state.{mode}.record_all_over_no_log", all_cost, detail)
        record_figure(f"state.{mode}.record_all_over_default", (agent - empty) / every, detail)
        record_figure(f"state.{mode}.record_all_over_raw", all_raw, detail)
    if AGENT_TTL in timings:
        ttl = timings[AGENT_TTL].wall - empty
        print(f"ratio agent with TTL/no log, net:           {(no_log - empty) / ttl:.2f}")
        print(f"ratio agent with TTL/raw, net:              {(raw - empty) / ttl:.2f}")
        record_figure(f"state.{mode}.ttl_over_no_log", (no_log - empty) / ttl, detail)
    if CODE in timings:
        code = timings[CODE].wall
        print(
            f"ratio action code alone/raw, net:           {(raw - empty) / (code - empty):.2f}"
            "   (the most the agent reaches if the framework cost nothing)"
        )
        record_figure(f"state.{mode}.code_over_raw", (raw - empty) / (code - empty), detail)
        print(
            "framework's own time, us/record net:         "
            f"{(no_log - code) / n * 1e6:.1f}   (agent without log - action code alone)"
        )
    print(f"ratio agent/raw, records/s net of the empty job: {ratio:.2f}")
    print(f"ratio agent/raw, records/s wall clock:           {raw / agent:.2f}")
    net_py = (raw - startup) / (agent - startup)
    print(f"ratio agent/raw, net of the Python start-up:     {net_py:.2f}")
    raw_cpu = timings[RAW].py_cpu + timings[RAW].jvm_cpu
    agent_cpu = timings[AGENT].py_cpu + timings[AGENT].jvm_cpu
    print(f"ratio agent/raw, CPU seconds (raw/agent):        {raw_cpu / agent_cpu:.2f}")
    met = without_log >= GOAL
    print(("MET" if met else "NOT MET") + f": agent without log/raw >= {GOAL}", flush=True)
    return ratio


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=1, help="runs per job; the median counts")
    parser.add_argument("--no-passthrough", action="store_true", help="skip the stateless job")
    parser.add_argument(
        "--no-record-all",
        action="store_true",
        help="skip the agent with action_log_record=all (every action recorded)",
    )
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="also run the agent with its action log on a PostgreSQL server started here",
    )
    parser.add_argument(
        "--ttl",
        action="store_true",
        help="also run the agent without a log with short-term-memory-ttl on (an hour: "
        "nothing expires, each key's activity and expiry check are kept)",
    )
    parser.add_argument("--bundle-size", type=int, help="python.fn-execution.bundle.size")
    parser.add_argument("--bundle-time", type=int, help="python.fn-execution.bundle.time (ms)")
    parser.add_argument(
        "--mode",
        choices=["thread", "process"],
        default="thread",
        help="python.execution-mode of every job (default: thread, as for our jobs)",
    )
    args = parser.parse_args(argv)
    n = args.records
    config = flink_config(args)

    print("== (a) state throughput: agent dispatcher vs raw KeyedProcessFunction ==")
    print(machine_summary())
    print(
        f"records={n:,} keys={agents.NUM_KEYS} parallelism=1 sink=DiscardingSink "
        f"repeat={args.repeat} flink-config={config or 'defaults'}",
        flush=True,
    )

    # Warm-up, not reported: JVM classes and JIT, the Python worker, imports; and a check
    # that both jobs compute the same, right values.
    verify(config)
    empty_job(n, config)
    raw_job(1_000, config)
    agent_job(1_000, config)
    if not args.no_record_all:
        verify_record_all(config)
    agents.COUNTS.clear()

    jobs: list[tuple[str, Callable[[], Timing]]] = [
        (EMPTY, lambda: empty_job(n, config)),
        (STARTUP, lambda: raw_job(128, config)),
    ]
    if not args.no_passthrough:
        jobs.append((PASSTHROUGH, lambda: passthrough_job(n, config)))
    agents_jobs: list[tuple[str, Callable[[], Timing]]] = [
        (AGENT, lambda: agent_job(n, config)),
        (AGENT_NO_LOG, lambda: agent_job(n, config, action_log="none")),
    ]
    if not args.no_record_all:
        agents_jobs.append((AGENT_ALL, lambda: agent_job(n, config, action_log_record="all")))
    if args.ttl:
        agents_jobs.append(
            (AGENT_TTL, lambda: agent_job(n, config, action_log="none", short_term_memory_ttl=3600))
        )
    jobs += [(RAW, lambda: raw_job(n, config)), (CODE, lambda: code_job(n, config))]

    postgres = None
    if args.postgres:
        from flink_agents.testing import PostgresServer

        postgres = PostgresServer().start()
        url = postgres.create_database()
        agents_jobs.append((AGENT_PG, lambda: agent_job(n, config, action_log=url)))
    jobs += agents_jobs
    try:
        runs: dict[str, list[Timing]] = {}
        for round_ in range(max(1, args.repeat)):
            # The agent jobs run in reverse order every other round (use an even --repeat),
            # so that neither always runs right after the raw job: a job's place in the
            # round can move its time by a few percent on this machine.
            order = jobs if round_ % 2 == 0 else jobs[: -len(agents_jobs)] + agents_jobs[::-1]
            for name, job in order:
                t = job()
                print(
                    f"  round {round_ + 1}: {name}: {t.wall:.2f} s wall, "
                    f"{t.py_cpu:.1f} s Python CPU, {t.jvm_cpu:.1f} s JVM CPU",
                    flush=True,
                )
                runs.setdefault(name, []).append(t)
    finally:
        if postgres is not None:
            postgres.stop()
    # The median run of each job (by wall clock): the machine is shared and noisy.
    median = {name: median_run(timings) for name, timings in runs.items()}
    print()
    report(n, median, args.mode, max(1, args.repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
