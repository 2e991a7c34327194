"""What many keys cost our own code: ``CounterAgent`` on the local runner (no Flink: the run
driver, engine and memory as on a TaskManager, over dict state), records round robin over
``--keys`` keys, with ``state-cache-keys`` at each of ``--caches``. CPU microseconds a record
(``time.process_time``, steadier than the wall clock on a shared machine), and what the
cycle collector found: the objects it freed are those a key left in reference cycles.

At 10,000 keys and the default cache (4,096) every record misses the cache, so this is the
cost of a key read back from state, against all keys cached (a cache larger than the keys)
and no cache at all. Issue 45 found the misses dearer than no cache (each key leaving the
cache left a cycle for the collector, and a plain dict's eviction scanned empty slots).

    PYTHONPATH=$PWD .venv/bin/python -m bench.key_cache [--keys 10000] [--caches 0,4096,20000]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time

from bench._common import machine_summary, table
from bench.agents import CounterAgent, record_key
from flink_agents.runtime import AgentOptions, LocalRunner


def run(keys: int, records: int, cache: int) -> tuple[float, int, int]:
    """(CPU us a record, gen-2 collections, objects the collector freed)."""
    runner = LocalRunner(CounterAgent, options=AgentOptions(state_cache_keys=cache))
    inputs = [(f"k{n % keys}", n) for n in range(records)]
    gc.collect()
    before = gc.get_stats()
    started = time.process_time()
    try:
        for record in inputs:
            runner.feed(record_key(record), record)
        runner.finish()
    finally:
        cpu = time.process_time() - started
        runner.close()
    after = gc.get_stats()
    if len(runner.keyed_outputs) != records:
        raise SystemExit(f"{len(runner.keyed_outputs)} outputs for {records} records")
    collected = sum(a["collected"] - b["collected"] for a, b in zip(after, before, strict=True))
    return cpu / records * 1e6, after[2]["collections"] - before[2]["collections"], collected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--caches", default="0,4096,20000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    caches = [int(c) for c in args.caches.split(",")]
    print("== many keys on the local runner: CPU a record by state-cache-keys ==")
    print(machine_summary())
    print(f"keys={args.keys:,} records={args.records:,} repeat={args.repeat}", flush=True)
    runs: dict[int, list[tuple[float, int, int]]] = {cache: [] for cache in caches}
    for round_ in range(args.repeat):
        for cache in caches:  # alternating, so that load spreads over all
            runs[cache].append(run(args.keys, args.records, cache))
            print(f"  round {round_ + 1}, cache {cache:,}: {runs[cache][-1][0]:.1f} us", flush=True)
    rows = [
        (
            f"{cache:,}",
            statistics.median(r[0] for r in runs[cache]),
            statistics.median(r[1] for r in runs[cache]),
            statistics.median(r[2] for r in runs[cache]) / args.records,
        )
        for cache in caches
    ]
    print(table(["state-cache-keys", "CPU us/record", "gen-2 collections", "freed/record"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
