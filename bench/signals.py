"""Waits for signals (``ctx.wait_for``, ``with_signals``) against raw PyFlink keeping a pending
request per key until its answer comes from a second stream.

Every key gets one record, and after all of them, one ``Answer`` signal. The agent
(``bench.agents.WaitsOne``) emits, and its second action waits for the key's answer (its run
set aside, a day's timeout) and emits the answer's number. The raw job
(``bench.agents.RawWaits``) keeps the request in a ``ValueState`` with a timeout timer and,
on the answer, emits, deletes the timer and clears the state. Both read one Java source of
``2 x keys`` numbers split in two streams (requests, then answers: one thread keeps their
order). The figures: keys (a wait begun and answered each) per second net of an empty job
over the same ``2 x keys`` numbers, their ratio, and the bytes of Flink state per key while
its run waits. Thread mode, parallelism 1, the default action log.

    PYTHONPATH=$PWD .venv/bin/python -m bench.signals [--keys 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import pickle
import sys

from pyflink.common import Types
from pyflink.datastream import FilterFunction, MapFunction

from bench import agents
from bench._common import (
    discard,
    enable_thread_mode,
    machine_summary,
    make_env,
    median_walls,
    record_figure,
    sequence,
    table,
)
from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.runtime.internal import (
    KeyControl,
    PendingAction,
    RunState,
    Waited,
    WaitingRun,
    encode_control,
)

_A_DAY_MS = 86_400_000


class _Below(FilterFunction):
    def __init__(self, keys: int, below: bool) -> None:
        self.keys, self.below = keys, below

    def filter(self, value: int) -> bool:
        return (value < self.keys) == self.below


class _Request(MapFunction):
    def map(self, value: int) -> tuple[str, int]:
        return f"k{value}", value


class _Answer(MapFunction):
    def __init__(self, keys: int) -> None:
        self.keys = keys

    def map(self, value: int) -> agents.Answer:
        return agents.Answer(key=f"k{value - self.keys}", n=value - self.keys)


def _streams(env, keys: int):
    numbers = sequence(env, 2 * keys)
    requests = numbers.filter(_Below(keys, True)).map(
        _Request(), output_type=Types.PICKLED_BYTE_ARRAY()
    )
    answers = numbers.filter(_Below(keys, False)).map(
        _Answer(keys), output_type=Types.PICKLED_BYTE_ARRAY()
    )
    return requests, answers


def _raw(env, keys: int):
    requests, answers = _streams(env, keys)
    return (
        requests.union(answers)
        .key_by(_raw_key, key_type=Types.STRING())
        .process(agents.RawWaits(), output_type=Types.PICKLED_BYTE_ARRAY())
    )


def _raw_key(value) -> str:
    return value.key if type(value) is agents.Answer else value[0]


def _agent(env, keys: int, **options):
    requests, answers = _streams(env, keys)
    environment = AgentsExecutionEnvironment.get_execution_environment(env, **options)
    return (
        environment.from_datastream(
            requests, key_selector=agents.record_key, key_type=Types.STRING()
        )
        .with_signals(answers, key_selector=agents.answer_key)
        .apply(agents.WaitsOne)
        .to_datastream()
    )


def verify(config: dict[str, str], keys: int = 200) -> None:
    """Both jobs emit two outputs per key, the second carrying the key's answer."""
    expected = sorted([(f"k{n}", -1) for n in range(keys)] + [(f"k{n}", n) for n in range(keys)])
    for name, build in (("raw", _raw), ("agent", _agent)):
        env = make_env(config=config)
        with build(env, keys).execute_and_collect() as results:
            outputs = sorted(tuple(o) for o in results)
        status = "ok" if outputs == expected else "WRONG"
        print(f"  verify {name}: {len(outputs)} outputs for {keys} keys, {status}", flush=True)
        if status != "ok":
            raise SystemExit(f"{name} produced wrong outputs")


def waiting_state_bytes() -> int:
    """Bytes of pickled Flink state per key while its run waits: its control value (run
    sequence, the run set aside with its queue, its wait and the type waited for)."""
    record = ("k123456", 123_456)
    run = RunState(key="k123456", sequence=1, input=record, steps=1, parked=True)
    run.queue.append(PendingAction("ask", agents.Ask(n=123_456)))
    run.waits = (Waited(agents.Answer, 1_900_000_000_000 + _A_DAY_MS),)
    waiting = WaitingRun(1_900_000_000_000 + _A_DAY_MS, run, (), signal=agents.Answer)
    return len(pickle.dumps(encode_control(KeyControl(1, None, 0, (), (waiting,)))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3, help="rounds; medians are reported")
    args = parser.parse_args(argv)
    enable_thread_mode()
    config = {"python.execution-mode": "thread"}
    print(machine_summary(), flush=True)
    verify(config)
    jobs = {
        "empty (source -> sink)": lambda env: discard(sequence(env, 2 * args.keys)),
        "raw: ValueState + timer, union": lambda env: discard(_raw(env, args.keys)),
        "agent: ctx.wait_for + with_signals": lambda env: discard(_agent(env, args.keys)),
    }
    wall = median_walls(jobs, args.repeat, config)
    empty = wall.pop("empty (source -> sink)")
    rows = [(name, w, w - empty, args.keys / (w - empty)) for name, w in wall.items()]
    print(table(["job", "wall s (median)", "net of empty s", "waits answered/s net"], rows))
    raw = wall["raw: ValueState + timer, union"] - empty
    agent = wall["agent: ctx.wait_for + with_signals"] - empty
    detail = f"{args.keys:,} keys, thread mode, median of {args.repeat}"
    print(f"ratio agent/raw, waits answered per second net of the empty job: {raw / agent:.2f}")
    print(f"state per key while its run waits: {waiting_state_bytes()} bytes")
    record_figure("signals.thread.agent_over_raw", raw / agent, detail)
    record_figure("signals.thread.waits_per_s", args.keys / agent, detail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
