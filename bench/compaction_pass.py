"""Benchmark: the CPU a trim pass of long-term memory's compaction costs, on a small store.

One run: ``--items`` items over ``--keys`` keys, each key's set ``recent`` of capacity
``--capacity`` (TRIM, the default strategy) filled to it through the API a job uses
(``VectorLongTermMemory``, ``for_key(key).create_memory_set(...).add(text)``), vectors from
a table (``TableEmbedding``: no model run), in the embedded store opened as runners open it
(``open_vector_store`` on a temporary directory). Then ``--rounds`` rounds: one add to each
of ``--passes`` keys (each puts its set one item over capacity, which schedules a pass),
then wait for compaction; per round, the CPU of the compaction thread per pass (its
``pthread_getcpuclockid`` clock: ``long_term_scale.thread_cpu``'s ``/proc`` ticks are 10 ms)
and of the adding thread per add.

``--ab BEFORE AFTER`` runs this file in fresh processes against two source trees (a
checkout or ``git worktree add --detach DIR REV``), alternating (before, after, before, ...)
``--processes`` times each, and prints the medians of each tree's rounds.

    PYTHONPATH=$PWD .venv/bin/python -m bench.compaction_pass [--items 10000] [--keys 1000]
    .venv/bin/python bench/compaction_pass.py --ab /tmp/before /work/main [--processes 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

COMPACTION_THREAD = "flink-agents-compaction"
SET_NAME = "recent"


def run_once(args: argparse.Namespace) -> list[dict[str, float]]:
    """Fill, then the timed rounds, in this process; one row per round."""
    import numpy as np

    from bench.long_term_memory import TableEmbedding
    from bench.long_term_scale import Passes
    from flink_agents.integrations.embeddings import LocalEmbeddingModel
    from flink_agents.integrations.vector_stores import open_vector_store
    from flink_agents.memory.long_term import VectorLongTermMemory

    per_key = args.items // args.keys
    texts = [f"memory {i}" for i in range(args.items + args.rounds * args.passes)]
    rng = np.random.default_rng(0)
    pool = rng.normal(size=(1000, 384)).astype(np.float32)  # items share a pool of vectors
    pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    table = TableEmbedding(LocalEmbeddingModel(), pool, {t: i % 1000 for i, t in enumerate(texts)})
    with tempfile.TemporaryDirectory() as directory:
        store = open_vector_store(Path(directory) / "vector-store")
        memory = VectorLongTermMemory(store, table, batcher=None)
        passes = Passes()
        memory.observer = passes
        added = 0

        def add(key: int) -> None:
            nonlocal added
            view = memory.for_key(f"user-{key}")
            view.create_memory_set(SET_NAME, str, args.capacity).add(texts[added])
            added += 1

        for i in range(per_key * args.keys):
            add(i % args.keys)
        assert memory.wait_for_compaction(600)
        assert passes.done == 0, "the fill must not go over capacity"
        memory.compactor.submit(lambda: None)  # starts the pool's thread, to find its clock
        assert memory.wait_for_compaction(60)
        (compactor,) = [t for t in threading.enumerate() if t.name.startswith(COMPACTION_THREAD)]
        compacting_clock = time.pthread_getcpuclockid(compactor.ident)
        rows = []
        for number in range(args.rounds):
            first = number * args.passes % args.keys
            done, cpu = passes.done, time.clock_gettime(compacting_clock)
            adding = time.thread_time()
            for j in range(args.passes):
                add((first + j) % args.keys)
            adding = time.thread_time() - adding
            assert memory.wait_for_compaction(600)
            compacting = time.clock_gettime(compacting_clock) - cpu
            count = passes.done - done
            assert count == args.passes, f"{count} passes for {args.passes} sets over capacity"
            rows.append(
                {
                    "CPU ms per pass": compacting * 1000 / count,
                    "CPU ms per add (adding thread)": adding * 1000 / args.passes,
                }
            )
        if args.calls:
            print_calls(memory, table.rows, args)
        memory.close()
        store.close()
    return rows


def print_calls(memory: Any, rows: dict[str, int], args: argparse.Namespace) -> None:
    """CPU of each store call a pass makes, on this thread, over ``--passes`` keys: a set
    of capacity + 2 items per key (no capacity set: nothing compacts it), the old pass's
    reads and delete (the oldest), then ``trim`` of the one left over the capacity. ``rows``:
    the table's vectors by text, extended with these sets' texts."""
    core = memory.core
    keys = [f"user-{k}" for k in range(args.passes)]
    for key in keys:
        texts = [f"call item {key}.{j}" for j in range(args.capacity + 2)]
        rows.update((text, len(rows) % 1000) for text in texts)
        memory.for_key(key).create_memory_set("calls", str).add(texts)
    spent: dict[str, float] = {}

    def timed(name: str, call: Callable[[], Any]) -> Any:
        began = time.thread_time()
        result = call()
        spent[name] = spent.get(name, 0.0) + time.thread_time() - began
        return result

    for key in keys:
        timed("settings (store get)", lambda key=key: core.settings(key, "calls"))
        timed("count", lambda key=key: core.count(key, "calls"))
        items = timed(
            "before: items() (count, ordered scroll, decode)",
            lambda key=key: core.items(key, "calls"),
        )
        timed(
            "before: delete", lambda key=key, items=items: core.delete(key, "calls", [items[0].id])
        )
        trimmed = timed(
            "after: trim (count, ordered scroll of 1, delete)",
            lambda key=key: core.trim(key, "calls", args.capacity),
        )
        assert trimmed == 1
    print(f"CPU per call, mean over {args.passes} sets of {args.capacity + 2} items:")
    for name, seconds in spent.items():
        print(f"  {name}: {seconds * 1e6 / args.passes:.0f} us")
    before = sum(v for name, v in spent.items() if not name.startswith("after"))
    after = (
        spent["settings (store get)"] + spent["after: trim (count, ordered scroll of 1, delete)"]
    )
    print(f"  a pass before (settings, count, items, delete): {before * 1e6 / args.passes:.0f} us")
    print(f"  a pass after (settings, trim): {after * 1e6 / args.passes:.0f} us")


def alternate(args: argparse.Namespace) -> None:
    """Run this file against the two trees in turn; print every round and the medians."""
    trees = {"before": Path(args.ab[0]).resolve(), "after": Path(args.ab[1]).resolve()}
    own = [a for a in sys.argv[1:] if a not in ("--ab", *args.ab)]
    rounds: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
    for number in range(args.processes):
        for label, tree in trees.items():
            load = os.getloadavg()[0]
            out = subprocess.run(
                [sys.executable, __file__, "--json", *own],
                cwd=tree,
                env={**os.environ, "PYTHONPATH": str(tree)},
                check=True,
                capture_output=True,
                text=True,
            )
            rows = json.loads(out.stdout.splitlines()[-1])
            rounds[label].extend(rows)
            shown = "; ".join(f"{r['CPU ms per pass']:.3f}" for r in rows)
            per_add = statistics.median(r["CPU ms per add (adding thread)"] for r in rows)
            print(
                f"process {number + 1} {label} ({tree}): CPU ms per pass by round {shown}; "
                f"per add {per_add:.3f} (load {load:.2f} at its start)",
                flush=True,
            )
    print(f"\nmedians over {args.processes} processes x {args.rounds} rounds:")
    for label, rows in rounds.items():
        shown = ", ".join(f"{n} {statistics.median(r[n] for r in rows):.3f}" for n in rows[0])
        print(f"  {label}: {shown}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--capacity", type=int, default=10)
    parser.add_argument("--passes", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--ab", nargs=2, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--json", action="store_true", help="one run; its rows as JSON")
    parser.add_argument("--calls", action="store_true", help="then each store call's CPU")
    args = parser.parse_args()
    if args.ab:
        alternate(args)
        return
    rows = run_once(args)
    if args.json:
        print(json.dumps(rows))
        return
    for number, row in enumerate(rows, 1):
        print(f"round {number}: " + ", ".join(f"{n} {v:.3f}" for n, v in row.items()))


if __name__ == "__main__":
    main()
