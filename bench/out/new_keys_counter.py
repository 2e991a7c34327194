"""The two-action ``CounterAgent`` and ``RawCounter`` over 10,000 keys seen once each (one
record per key), thread mode, medians of 3 rounds: what a key seen for the first time costs,
for comparison with ``bench/scheduled_events.py`` (RESULTS.md, 2026-11-29 11:43).

    PYTHONPATH=$PWD .venv/bin/python -m bench.out.new_keys_counter
"""

import statistics

from pyflink.common import Types

from bench import agents
from bench._common import (
    discard,
    enable_thread_mode,
    key_stream,
    keyed_records,
    make_env,
    sequence,
    timed,
)
from flink_agents.api import AgentsExecutionEnvironment

KEYS = 10_000


def raw(env) -> None:
    stream = key_stream(keyed_records(env, KEYS, KEYS))
    discard(stream.process(agents.RawCounter(), output_type=Types.PICKLED_BYTE_ARRAY()))


def agent(env, **options) -> None:
    environment = AgentsExecutionEnvironment.get_execution_environment(env, **options)
    records = keyed_records(env, KEYS, KEYS)
    built = environment.from_datastream(
        records, key_selector=agents.record_key, key_type=Types.STRING()
    )
    discard(built.apply(agents.CounterAgent).to_datastream())


def main() -> None:
    enable_thread_mode()
    config = {"python.execution-mode": "thread"}
    jobs = {
        "empty": lambda env: discard(sequence(env, KEYS)),
        "raw counter": raw,
        "agent counter": agent,
        "agent counter no log": lambda env: agent(env, action_log="none"),
    }
    walls: dict[str, list[float]] = {name: [] for name in jobs}
    for _ in range(3):
        for name, build in jobs.items():
            env = make_env(config=config)
            build(env)
            walls[name].append(timed(env, name).wall)
    median = {name: statistics.median(w) for name, w in walls.items()}
    empty = median.pop("empty")
    for name, wall in median.items():
        print(name, round(wall, 2), round(wall - empty, 2), round(KEYS / (wall - empty)))
    raw_net = median["raw counter"] - empty
    print(
        "agent/raw",
        round(raw_net / (median["agent counter"] - empty), 2),
        "no log/raw",
        round(raw_net / (median["agent counter no log"] - empty), 2),
    )


if __name__ == "__main__":
    main()
