"""Scheduled events (``ctx.schedule``) against raw PyFlink keeping an event per key.

Every key gets one record. The agent (``bench.agents.SchedulesOne``) schedules an event a day
ahead and emits; at the end of the bounded input the event fires (the driver's end of input:
``docs/waiting.md``) and its run emits again. The raw job (``bench.agents.RawScheduled``) keeps
the same event in a ``ValueState`` with an event-time timer that the input's last watermark
fires, and emits the same two outputs. So both keep one event per key until the end and
then fire them all: the figures are records (one scheduled event each) per second net of an
empty job, their ratio, and the bytes of Flink state each keeps per key while the event is
pending (its pickled control value against raw's pickled event). Thread mode, parallelism 1,
the default action log (``--no-log``: without it too). ``--sleep`` adds the agent that sleeps
instead (``bench.agents.SleepsOne``: its run is set aside a day, ``ctx.sleep``), and the bytes
of its key's state while it sleeps.

    PYTHONPATH=$PWD .venv/bin/python -m bench.scheduled_events [--keys 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import pickle
import sys

from pyflink.common import Types

from bench import agents
from bench._common import (
    discard,
    enable_thread_mode,
    key_stream,
    keyed_records,
    machine_summary,
    make_env,
    median_walls,
    record_figure,
    sequence,
    table,
)
from flink_agents.api import AgentsExecutionEnvironment, EventScheduled
from flink_agents.runtime.internal import (
    KeyControl,
    PendingAction,
    RunState,
    WaitingRun,
    encode_control,
)


def _raw(env, keys: int):
    stream = key_stream(keyed_records(env, keys, keys))
    return stream.process(agents.RawScheduled(), output_type=Types.PICKLED_BYTE_ARRAY())


def _agent(env, keys: int, agent=agents.SchedulesOne, **options):
    environment = AgentsExecutionEnvironment.get_execution_environment(env, **options)
    return (
        environment.from_datastream(
            keyed_records(env, keys, keys), key_selector=agents.record_key, key_type=Types.STRING()
        )
        .apply(agent)
        .to_datastream()
    )


def verify(config: dict[str, str], keys: int = 200) -> None:
    """Both jobs emit two outputs per key, the second carrying the record's number."""
    expected = sorted([(f"k{n}", -1) for n in range(keys)] + [(f"k{n}", n) for n in range(keys)])
    builds = (("raw", _raw), ("agent", _agent), ("sleeping agent", _sleeping))
    for name, build in builds:
        env = make_env(config=config)
        with build(env, keys).execute_and_collect() as results:
            outputs = sorted(tuple(o) for o in results)
        status = "ok" if outputs == expected else "WRONG"
        print(f"  verify {name}: {len(outputs)} outputs for {keys} keys, {status}", flush=True)
        if status != "ok":
            raise SystemExit(f"{name} produced wrong outputs")


def _sleeping(env, keys: int, **options):
    return _agent(env, keys, agents.SleepsOne, **options)


def sleeping_state_bytes() -> int:
    """Bytes of pickled Flink state per key while its run sleeps: its control value (run
    sequence, the run set aside with its queue and wake time; no sensory memory)."""
    record = ("k123456", 123_456)
    run = RunState(key="k123456", sequence=1, input=record, steps=1, parked=True)
    run.queue.append(PendingAction("nap", agents.Nap(n=123_456)))
    run.wakes = (1_900_000_000_000,)
    waiting = WaitingRun(1_900_000_000_000, run, ())
    return len(pickle.dumps(encode_control(KeyControl(1, None, 0, (), (waiting,)))))


def state_bytes() -> tuple[int, int]:
    """Bytes of pickled Flink state per key while its event is pending: our control value
    (run sequence, handle, due time, event) against raw's event."""
    event = agents.Due(n=123_456)
    entry = EventScheduled(
        handle="5f0c1e7a-1b2c-5d3e-8f4a-6b7c8d9e0f1a", due_ms=1_900_000_000_000, event=event
    )
    ours = len(pickle.dumps(encode_control(KeyControl(1, None, 0, (entry,)))))
    raw = len(pickle.dumps(event))
    return ours, raw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3, help="rounds; medians are reported")
    parser.add_argument("--no-log", action="store_true", help="also run with action_log=none")
    parser.add_argument("--sleep", action="store_true", help="also run the agent that sleeps")
    args = parser.parse_args(argv)
    enable_thread_mode()
    config = {"python.execution-mode": "thread"}
    print(machine_summary(), flush=True)
    verify(config)
    jobs = {
        "empty (source -> sink)": lambda env: discard(sequence(env, args.keys)),
        "raw: ValueState + event-time timer": lambda env: discard(_raw(env, args.keys)),
        "agent: ctx.schedule, default log": lambda env: discard(_agent(env, args.keys)),
    }
    if args.no_log:
        jobs["agent: ctx.schedule, action_log=none"] = lambda env: discard(
            _agent(env, args.keys, action_log="none")
        )
    if args.sleep:
        jobs["agent: ctx.sleep, default log"] = lambda env: discard(_sleeping(env, args.keys))
    wall = median_walls(jobs, args.repeat, config)
    empty = wall.pop("empty (source -> sink)")
    rows = [(name, w, w - empty, args.keys / (w - empty)) for name, w in wall.items()]
    print(table(["job", "wall s (median)", "net of empty s", "keys (events)/s net"], rows))
    raw = wall["raw: ValueState + event-time timer"] - empty
    agent = wall["agent: ctx.schedule, default log"] - empty
    ours, raw_bytes = state_bytes()
    detail = f"{args.keys:,} keys, thread mode, median of {args.repeat}"
    print(f"ratio agent/raw, keys per second net of the empty job: {raw / agent:.2f}")
    print(f"state per key with its event pending: {ours} bytes against raw's {raw_bytes}")
    record_figure("scheduled.thread.agent_over_raw", raw / agent, detail)
    record_figure("scheduled.thread.events_per_s", args.keys / agent, detail)
    if args.sleep:
        sleeping = wall["agent: ctx.sleep, default log"] - empty
        print(f"ratio sleeping agent/raw, keys per second net of empty: {raw / sleeping:.2f}")
        print(f"state per key while its run sleeps: {sleeping_state_bytes()} bytes")
        record_figure("sleeping.thread.agent_over_raw", raw / sleeping, detail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
