"""Micro benchmark: the embedded vector store (``EdgeVectorStore`` on qdrant-edge-py).

For each size in ``--points`` a fresh store in a temporary directory receives that many
random L2-normalised vectors (384 dimensions by default) spread over 1000 keys, in batches
of ``--batch``; the default payload indexes are in place, as long-term memory has them.
Then ``--queries`` searches for 10 neighbours filtered on one random key, and as many
"most recent 10 of a key" scrolls (filter on the key, ordered by ``created_time``), are timed
one by one, and a few hundred unfiltered searches for comparison.

Embedding is excluded: vectors are made with numpy outside the timed calls. Upsert
throughput times only ``store.upsert`` (our validation plus the engine). Search is exact
(no ``optimize()``) unless ``--optimize`` is given; that also times ``optimize()``, which
takes minutes at 100k points on 2 cores.

    PYTHONPATH=$PWD .venv/bin/python -m bench.vector_store [--points 10000,100000] [--queries 1000]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import version

import numpy as np

from flink_agents.integrations.vector_stores import FieldMatch, Filter, OrderBy, Point, point_id
from flink_agents.integrations.vector_stores.edge import EdgeVectorStore

COLLECTION = "bench"
UNFILTERED_QUERIES = 200


def unit_vectors(rng: np.random.Generator, count: int, dim: int) -> list[list[float]]:
    vectors = rng.standard_normal((count, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.tolist()


def load(
    store: EdgeVectorStore, rng: np.random.Generator, points: int, args: argparse.Namespace
) -> float:
    """Upsert ``points`` points; returns the seconds spent inside ``store.upsert``."""
    spent = 0.0
    for start in range(0, points, args.batch):
        count = min(args.batch, points - start)
        batch = [
            Point(
                point_id("bench", start + j),
                vector,
                {
                    "key": f"user-{(start + j) % args.keys}",
                    "created_time": 1.7e9 + start + j,
                    "tags": [f"t{(start + j) % 7}"],
                },
            )
            for j, vector in enumerate(unit_vectors(rng, count, args.dim))
        ]
        began = time.perf_counter()
        store.upsert(COLLECTION, batch)
        spent += time.perf_counter() - began
    return spent


def latencies(calls: int, call: Callable[[int], object]) -> list[float]:
    """Milliseconds of each of ``calls`` calls, sorted."""
    out = []
    for n in range(calls):
        began = time.perf_counter()
        call(n)
        out.append((time.perf_counter() - began) * 1000)
    return sorted(out)


def pct(sorted_ms: list[float], p: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, round(p / 100 * (len(sorted_ms) - 1)))]


def measure(points: int, args: argparse.Namespace) -> list[str]:
    rng = np.random.default_rng(points)
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-vectors-") as directory,
        EdgeVectorStore(directory) as store,
    ):
        store.ensure_collection(COLLECTION, args.dim, "bench:random-normal")
        seconds = load(store, rng, points, args)
        assert store.count(COLLECTION) == points
        rows.append(f"{points:>8,}  upsert  {points / seconds:>9,.0f} points/s  ({seconds:.1f} s)")
        rows += query_rows(store, rng, args, "exact")
        if args.optimize:
            began = time.perf_counter()
            store.optimize(COLLECTION)
            rows.append(f"{points:>8,}  optimize()  {time.perf_counter() - began:.1f} s")
            rows += query_rows(store, rng, args, "hnsw")
    return rows


def query_rows(
    store: EdgeVectorStore, rng: np.random.Generator, args: argparse.Namespace, mode: str
) -> list[str]:
    probes = unit_vectors(rng, args.queries, args.dim)
    keys = [f"user-{k}" for k in rng.integers(0, args.keys, args.queries)]
    newest = OrderBy("created_time", descending=True)

    def by_key(n: int) -> Filter:
        return Filter(must=[FieldMatch("key", keys[n])])

    filtered = latencies(args.queries, lambda n: store.search(COLLECTION, probes[n], 10, by_key(n)))
    recent = latencies(args.queries, lambda n: store.scroll(COLLECTION, by_key(n), 10, newest))
    unfiltered = latencies(
        min(args.queries, UNFILTERED_QUERIES), lambda n: store.search(COLLECTION, probes[n], 10)
    )
    return [
        f"{'':>8}  {label:<34} p50 {pct(ms, 50):7.3f} ms  p95 {pct(ms, 95):7.3f} ms  "
        f"mean {statistics.fmean(ms):7.3f} ms  (n={len(ms)})"
        for label, ms in (
            (f"search, filter on key ({mode})", filtered),
            ("scroll newest 10 of a key", recent),
            (f"search, no filter ({mode})", unfiltered),
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", default="10000,100000", help="comma-separated sizes")
    parser.add_argument("--queries", type=int, default=1000, help="timed queries per kind")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=1000, help="points per upsert call")
    parser.add_argument("--optimize", action="store_true", help="also time optimize() (slow)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.points.split(",") if s.strip()]
    load_avg = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"qdrant-edge-py={version('qdrant-edge-py')} python={platform.python_version()} "
        f"cpus={os.cpu_count()} load average now: {load_avg}"
    )
    print(f"dim={args.dim} keys={args.keys} batch={args.batch} queries={args.queries}")
    for points in sizes:
        for row in measure(points, args):
            print(row, flush=True)


if __name__ == "__main__":
    main()
