"""State throughput of Apache Flink Agents 0.2.0 on the two-action memory agent.

The counterpart of ``bench/state_throughput.py`` for the Apache project (PyPI package
``flink-agents``, Java runtime, Python actions run by its operator through pemja). Run it
with the Python of the venv ``bench/apache_flink_agents/setup.sh`` creates; that venv holds
``flink-agents==0.2.0`` on ``apache-flink==2.2.1``. Both projects import as
``flink_agents``, so this script never runs in the project's own venv.

Three jobs, all at parallelism 1 into a discarding sink, timed around ``env.execute()``:

* empty: NumberSequenceSource(0, N-1) -> DiscardingSink (start-up, to subtract);
* raw: the source mapped to ``(key, n)`` over 128 keys, keyed by the key, then a PyFlink
  ``KeyedProcessFunction`` doing the agent's state work on a ``MapState`` (two gets, two
  puts, one output per record);
* agent: the same keyed input into an Apache Flink Agents agent with two actions: on the
  ``InputEvent`` read short-term memory ``count``, write ``count + 1`` and send a ``Counted``
  event; on ``Counted`` read ``sum``, write ``sum + n`` and send an ``OutputEvent`` with
  ``(key, count, sum)``. Its outputs go through the project's own ``to_datastream()``.

Records/s are net of the empty job: ``N / (median agent wall - median empty wall)``.

    .bench-venvs/apache-flink-agents/bin/python bench/apache_flink_agents/memory_agent.py \
        --records 20000 --mode thread
"""

from __future__ import annotations

import argparse
import atexit
import datetime
import json
import os
import platform
import shutil
import statistics
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
NUM_KEYS = 128
DISCARDING_SINK = "org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink"


# -- the environment: set up before the first pyflink / flink_agents import --------------------


def _prepare_process_environment() -> None:
    """Make this module and the venv's packages importable wherever Python runs: the
    client, the Python worker (process mode, loopback: in this process) and the embedded
    interpreters of the JVM (thread mode, and the agent operator's pemja interpreter).

    The JVM inherits this process's environment when the first environment is built, so
    this must run first. The working directory moves to a scratch directory so that no
    other ``flink_agents`` (such as the repository's own, at its root) can shadow
    Apache's through ``sys.path``."""
    site_packages = sysconfig.get_paths()["purelib"]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE), site_packages])
    scratch = tempfile.mkdtemp(prefix="apache-flink-agents-bench-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    os.chdir(scratch)
    for entry in list(sys.path):
        resolved = Path(entry or ".").resolve()
        if resolved != HERE and (resolved / "flink_agents").is_dir() and entry != site_packages:
            sys.path.remove(entry)


if __name__ == "__main__":
    # The agent's actions and event classes are found by module name inside the JVM
    # (``__main__`` there is not this script): run everything from the importable module.
    _prepare_process_environment()
    import memory_agent

    sys.exit(memory_agent.main())


from pyflink.common import Configuration, Types, WatermarkStrategy  # noqa: E402
from pyflink.datastream import (  # noqa: E402
    KeyedProcessFunction,
    RuntimeContext,
    StreamExecutionEnvironment,
)
from pyflink.datastream.connectors.base import Sink  # noqa: E402
from pyflink.datastream.connectors.number_seq import NumberSequenceSource  # noqa: E402
from pyflink.datastream.state import MapStateDescriptor  # noqa: E402

from flink_agents.api.agents.agent import Agent  # noqa: E402
from flink_agents.api.decorators import action  # noqa: E402
from flink_agents.api.events.event import Event, InputEvent, OutputEvent  # noqa: E402
from flink_agents.api.execution_environment import AgentsExecutionEnvironment  # noqa: E402
from flink_agents.api.runner_context import RunnerContext  # noqa: E402

RECORD_TYPE = Types.TUPLE([Types.STRING(), Types.LONG()])


# -- the agent (Apache Flink Agents' API) -------------------------------------------------------


class Counted(Event):
    """Sent by the first action to the second. The key travels with it: the Python
    ``RunnerContext`` of Apache Flink Agents 0.2.0 does not expose the current key."""

    key: str
    n: int
    count: int


class CounterAgent(Agent):
    """Two actions, two short-term memory fields: a per-key counter and a running sum."""

    @action(InputEvent)
    @staticmethod
    def count(event: InputEvent, ctx: RunnerContext) -> None:
        key, n = event.input
        memory = ctx.short_term_memory
        count = (memory.get("count") or 0) + 1
        memory.set("count", count)
        ctx.send_event(Counted(key=key, n=n, count=count))

    @action(Counted)
    @staticmethod
    def total(event: Counted, ctx: RunnerContext) -> None:
        memory = ctx.short_term_memory
        total = (memory.get("sum") or 0) + event.n
        memory.set("sum", total)
        ctx.send_event(OutputEvent(output=(event.key, event.count, total)))


# -- the raw job (plain PyFlink on the same apache-flink) ---------------------------------------


class RawCounter(KeyedProcessFunction):
    """The same state work written directly on a MapState[str, pickled]."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.memory = runtime_context.get_map_state(
            MapStateDescriptor("short_term", Types.STRING(), Types.PICKLED_BYTE_ARRAY())
        )

    def process_element(self, value: tuple[str, int], ctx: KeyedProcessFunction.Context):
        memory = self.memory
        count = (memory.get("count") or 0) + 1
        memory.put("count", count)
        total = (memory.get("sum") or 0) + value[1]
        memory.put("sum", total)
        yield ctx.get_current_key(), count, total


# -- pipeline pieces ---------------------------------------------------------------------------


class ToRecord:
    """Sequence number ``n`` -> ``(key, n)`` over ``num_keys`` keys."""

    def __init__(self, num_keys: int) -> None:
        self.num_keys = num_keys

    def __call__(self, n: int) -> tuple[str, int]:
        return f"k{n % self.num_keys}", n


def record_key(record: tuple[str, int]) -> str:
    return record[0]


def make_env(config: dict[str, str]) -> StreamExecutionEnvironment:
    configuration = Configuration()
    for name, value in config.items():
        configuration.set_string(name, value)
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(1)
    env.set_python_executable(sys.executable)
    return env


def sequence(env: StreamExecutionEnvironment, records: int):
    return env.from_source(
        NumberSequenceSource(0, records - 1), WatermarkStrategy.no_watermarks(), "sequence"
    )


def discard(stream) -> None:
    stream.sink_to(Sink(DISCARDING_SINK))


def raw_stream(env: StreamExecutionEnvironment, records: int, keys: int):
    return (
        sequence(env, records)
        .map(ToRecord(keys), output_type=RECORD_TYPE)
        .key_by(record_key, key_type=Types.STRING())
        .process(RawCounter(), output_type=Types.PICKLED_BYTE_ARRAY())
    )


def agent_stream(env: StreamExecutionEnvironment, records: int, keys: int):
    # The agent operator hands the keyed record to Python as pickled bytes, so the records
    # are pickled here (a typed tuple, as the raw job has, would reach it as a Java Tuple2).
    keyed = (
        sequence(env, records)
        .map(ToRecord(keys), output_type=Types.PICKLED_BYTE_ARRAY())
        .key_by(record_key, key_type=Types.STRING())
    )
    agents_env = AgentsExecutionEnvironment.get_execution_environment(env=env)
    return agents_env.from_datastream(keyed).apply(CounterAgent()).to_datastream()


# -- jobs --------------------------------------------------------------------------------------


def timed(env: StreamExecutionEnvironment, name: str) -> float:
    started = time.perf_counter()
    env.execute(name)
    return time.perf_counter() - started


def empty_job(records: int, keys: int, config: dict[str, str]) -> float:
    env = make_env(config)
    discard(sequence(env, records))
    return timed(env, "empty")


def raw_job(records: int, keys: int, config: dict[str, str]) -> float:
    env = make_env(config)
    discard(raw_stream(env, records, keys))
    return timed(env, "raw MapState")


def agent_job(records: int, keys: int, config: dict[str, str]) -> float:
    env = make_env(config)
    discard(agent_stream(env, records, keys))
    return timed(env, "apache flink agents")


def verify(keys: int, config: dict[str, str], per_key: int = 10) -> None:
    """Outputs of both jobs on a small input: one per record, and the right final count
    and sum per key (collected; never used for the figures)."""
    n = per_key * keys
    expected = {f"k{k}": (per_key, sum(range(k, n, keys))) for k in range(keys)}
    for name, build in (("raw", raw_stream), ("apache flink agents", agent_stream)):
        env = make_env(config)
        with build(env, n, keys).execute_and_collect() as results:
            outputs = list(results)
        final: dict[str, tuple[int, int]] = {}
        for key, count, total in outputs:
            final[key] = max(final.get(key, (0, 0)), (count, total))
        status = "ok" if len(outputs) == n and final == expected else "WRONG"
        print(f"  verify {name}: {len(outputs)} outputs for {n} records, final values {status}")
        if status != "ok":
            raise SystemExit(f"{name} job produced wrong results")


# -- report ------------------------------------------------------------------------------------


def header(args: argparse.Namespace, config: dict[str, str]) -> str:
    from importlib.metadata import version

    import flink_agents

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{now}; load average {load}; cpus={os.cpu_count()} python={platform.python_version()}\n"
        f"flink-agents={version('flink-agents')} ({Path(flink_agents.__file__).parent}) "
        f"apache-flink={version('apache-flink')}\n"
        f"records={args.records:,} keys={args.keys} parallelism=1 sink=DiscardingSink "
        f"repeat={args.repeat} (median) flink-config={config}"
    )


def record_figure(figure: str, value: float, detail: str) -> None:
    """Append a figure to ``$BENCH_FIGURES`` as ``bench._common.record_figure`` does (that
    module imports ours, which cannot load in this venv)."""
    path = os.environ.get("BENCH_FIGURES")
    if not path:
        return
    at = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    entry = {"figure": figure, "value": value, "detail": detail, "at": at}
    entry["load"] = os.getloadavg()[0]
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(entry) + "\n")


def report(records: int, walls: dict[str, list[float]], mode: str = "thread") -> None:
    empty = statistics.median(walls["empty"])
    print(f"{'job':<22} {'median wall s':>13} {'runs s':>22} {'rec/s wall':>11} {'rec/s net':>10}")
    net_rates = {}
    for name, times in walls.items():
        median = statistics.median(times)
        runs = " ".join(f"{t:.2f}" for t in times)
        if name == "empty":
            print(f"{name:<22} {median:>13.2f} {runs:>22} {'':>11} {'':>10}")
            continue
        net = median - empty
        net_rates[name] = records / net if net > 0 else float("nan")
        print(
            f"{name:<22} {median:>13.2f} {runs:>22} {records / median:>11,.0f} "
            f"{net_rates[name]:>10,.0f}"
        )
    ratio = net_rates["apache flink agents"] / net_rates["raw"]
    print(f"\nratio apache flink agents / raw, records/s net of the empty job: {ratio:.2f}")
    detail = f"{records:,} records, {mode} mode, median of {len(walls['raw'])}"
    record_figure(f"apache.{mode}.rec_s", net_rates["apache flink agents"], detail)
    record_figure(f"apache.{mode}.raw_rec_s", net_rates["raw"], detail)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--keys", type=int, default=NUM_KEYS)
    parser.add_argument("--mode", choices=["thread", "process"], default="thread")
    parser.add_argument("--repeat", type=int, default=3, help="runs per job; the median counts")
    args = parser.parse_args(argv)

    import flink_agents.api.execution_environment  # noqa: F401  (Apache's, not ours)

    config = {"python.execution-mode": args.mode}
    if args.mode == "thread":
        config["python.pythonpath"] = os.environ["PYTHONPATH"]
    print("== Apache Flink Agents 0.2.0: two-action memory agent vs raw KeyedProcessFunction ==")
    print(header(args, config), flush=True)

    # Warm-up, not reported: JVM classes and JIT, Python imports; and the correctness check.
    verify(args.keys, config)
    for job in (empty_job, raw_job, agent_job):
        job(1_000, args.keys, config)

    jobs = {"empty": empty_job, "raw": raw_job, "apache flink agents": agent_job}
    walls: dict[str, list[float]] = {name: [] for name in jobs}
    for round_ in range(max(1, args.repeat)):
        for name, job in jobs.items():
            wall = job(args.records, args.keys, config)
            walls[name].append(wall)
            print(f"  round {round_ + 1}: {name}: {wall:.2f} s wall", flush=True)
    print()
    report(args.records, walls, args.mode)
    return 0
