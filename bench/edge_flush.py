"""Probe: what ``EdgeShard.flush`` costs, and what it does to the write-ahead log.

Nothing of ours called ``flush`` when this was written (``bench/RESULTS.md``, 1M items: 2.2
of 4.2 GB on disk was the engine's WAL); the store now flushes every ``flush_interval_s``,
which this probe turns off. This fills an ``EdgeVectorStore`` in a temporary directory with
``--points`` points shaped like long-term memory items (``long_term_memory.payload``, random
unit vectors), one point per ``upsert`` as the batcher writes an action's item, and after
every ``--every`` points: the shard's directories' sizes on disk, then a ``flush`` (wall,
CPU of this process), the sizes again, and a second ``flush`` at once (the cost of one with
nothing new). During each flush a second thread counts one key's points in a loop (1 ms
apart): the longest gap between its calls is how long the flush kept other threads from
the store or the GIL (a loop without a flush: a few ms).

With ``--reopen`` the fill runs in a child process that ends as ``--end`` says (``close``,
or ``crash``: without closing the store), and this process times opening the store again
(the engine replays what its log holds) and its first count.

    PYTHONPATH=$PWD .venv/bin/python -m bench.edge_flush [--points 100000] [--every 25000] \\
        [--no-flush] [--reopen --end crash]
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from bench.long_term_memory import COLLECTION, load_average, payload
from bench.long_term_scale import disk_mib
from flink_agents.integrations.vector_stores import FieldMatch, Filter, Point, point_id
from flink_agents.integrations.vector_stores.edge import EdgeVectorStore

KEYS = 10_000


def sizes(shard: Path) -> str:
    """Each entry of the shard's directory, MiB on disk."""
    parts = [
        f"{entry.name} {disk_mib(entry) if entry.is_dir() else entry.stat().st_blocks / 2048:.0f}"
        for entry in sorted(shard.iterdir())
    ]
    return ", ".join(parts)


def timed_flush(store: EdgeVectorStore, shard: object) -> tuple[float, float, float]:
    """(wall s, CPU s of the process, longest gap between another thread's ``count`` calls
    meanwhile, s: how long it was kept from the store or the GIL)."""
    done = threading.Event()
    longest = 0.0

    def probe() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done.is_set():
            store.count(COLLECTION, Filter(must=[FieldMatch("key", "user-1")]))
            time.sleep(0.001)
            now = time.perf_counter()
            longest, last = max(longest, now - last), now

    prober = threading.Thread(target=probe, name="probe")
    prober.start()
    time.sleep(0.1)
    cpu, began = time.process_time(), time.perf_counter()
    shard.flush()  # type: ignore[attr-defined]
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    time.sleep(0.1)
    done.set()
    prober.join()
    return wall, cpu, longest


def fill(directory: Path, args: argparse.Namespace) -> None:
    """Add the points, flushing after every ``--every`` unless ``--no-flush``; then close
    (timed), or with ``--end crash`` end the process without closing."""
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(1000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    # No flushes but this probe's (the store's own, every ``flush_interval_s``, are off).
    store = EdgeVectorStore(directory / "store", flush_interval_s=None)
    store.ensure_collection(COLLECTION, 384, "probe")
    shard_dir = directory / "store" / COLLECTION / "shard"
    shard = store._get(COLLECTION).shard  # the engine's handle, to time its flush alone
    for start in range(0, args.points, args.every):
        began = time.perf_counter()
        for i in range(start, min(start + args.every, args.points)):
            vector = vectors[i % 1000].tolist()
            store.upsert(COLLECTION, [Point(point_id("probe", i), vector, payload(i, KEYS, "x"))])
        added = time.perf_counter() - began
        print(
            f"{i + 1:,} points (the last {i + 1 - start:,} added in {added:.0f} s): "
            f"{sizes(shard_dir)}",
            flush=True,
        )
        for label in () if args.no_flush else ("flush", "flush again"):
            wall, cpu, longest = timed_flush(store, shard)
            print(
                f"  {label}: {wall:.2f} s wall, {cpu:.2f} s CPU, another thread's counts "
                f"{longest * 1000:.0f} ms apart at most; then {sizes(shard_dir)} "
                f"(load {load_average()})",
                flush=True,
            )
    if args.end == "crash":
        print("ending without closing the store", flush=True)
        os._exit(0)
    began = time.perf_counter()
    store.close()
    print(f"close: {time.perf_counter() - began:.2f} s; then {sizes(shard_dir)}")


def reopen(directory: Path, args: argparse.Namespace) -> None:
    """Fill in a child process that ends as ``--end`` says, then time opening the store
    here (the engine replays its log) and its first count."""
    child = [sys.executable, "-m", "bench.edge_flush", "--directory", str(directory)]
    child += ["--points", str(args.points), "--every", str(args.every), "--end", args.end]
    subprocess.run([*child, *(["--no-flush"] if args.no_flush else [])], check=True)
    began = time.perf_counter()
    store = EdgeVectorStore(directory / "store")
    count = store.count(COLLECTION)
    opened = time.perf_counter() - began
    shard_dir = directory / "store" / COLLECTION / "shard"
    print(f"reopened after '{args.end}': {opened:.2f} s to open and count {count:,} points")
    began = time.perf_counter()
    store.close()
    print(f"close: {time.perf_counter() - began:.2f} s; then {sizes(shard_dir)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=25_000)
    parser.add_argument("--no-flush", action="store_true", help="no flush before the end")
    parser.add_argument("--end", choices=["close", "crash"], default="close")
    parser.add_argument("--reopen", action="store_true", help="fill in a child, reopen here")
    parser.add_argument("--directory", type=Path, help="fill here (a child of --reopen)")
    args = parser.parse_args()
    if args.directory is not None:
        fill(args.directory, args)
        return
    print(f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M:%S} UTC, load {load_average()}")
    with tempfile.TemporaryDirectory() as directory:
        (reopen if args.reopen else fill)(Path(directory), args)
    print(f"# ended {datetime.datetime.now(datetime.UTC):%H:%M:%S} UTC, load {load_average()}")


if __name__ == "__main__":
    main()
