"""Benchmark: long-term memory on the embedded default (qdrant-edge-py + the offline MiniLM).

What it times, for each size in ``--points`` (10k and 100k by default), in a fresh
``EdgeVectorStore`` in a temporary directory, with points spread over ``--keys`` keys and
payloads shaped like long-term memory items (key, set, kind, created time, tags, value):

- **add, embedding included**: ``LocalEmbeddingModel.embed`` + ``store.upsert`` of
  ``--sample`` generated sentences, one item per call and ``--batch`` items per call. Only a
  sample: the model embeds ~160 sentences/s on 2 cores, so 100k would take over 10 minutes.
- **add, embedding excluded**: ``store.upsert`` of every point. Past the sample, points reuse
  the sample's vectors plus Gaussian noise (``--noise`` per dimension, then normalised, so
  cosine ~0.98 to the original) with their own ids, keys and payloads: real sentence vectors,
  clustered as real memories are, not uniform random ones.
- **search**: the 10 nearest items of one key's set (filter: key, set and item kinds, as
  ``MemorySet.search`` sends), for ``--queries`` held-out sentences (never stored), p50/p95,
  with the query's embedding excluded (vectors made beforehand) and included
  (``embed_one`` + search in the timed call); the query embedding alone is timed too (also
  with onnxruntime on one thread, once, before the sizes). Exact
  search first; with ``--optimize``, again after ``optimize()`` (HNSW), which is timed.
  ``embed_one`` keeps recent query vectors (``query_cache_size``); the cache is cleared
  before every timed pass over the queries, so "embedding included" always runs the model,
  and a last row times the same queries again, as a repeated query costs (cache hits).
- **through the long-term memory API** (``--api``): the same on ``MemorySet.add``/``search``
  of ``VectorLongTermMemory`` (capacity None, so no compaction; access tracking on, as by
  default, so every search also queues a background rewrite of the points it returned).
  Fill items and, for "embedding excluded", the queries get their vectors from a table
  (``TableEmbedding``: the same vectors as above, under the real model's id); everything
  else goes through the real model. Its reads are written by the ``AccessRecorder`` (one
  paced background write per interval), which the figures include; the recorder's writes
  are counted and timed (``touch``) and printed below the search rows.

Printed figures only; nothing asserts on time.

    PYTHONPATH=$PWD .venv/bin/python -m bench.long_term_memory [--points 10000,100000] \\
        [--sample 3000] [--queries 1000] [--optimize] [--api]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from importlib.metadata import version
from typing import Any

import numpy as np

from bench.vector_store import latencies, pct
from flink_agents.api import BaseEmbeddingModel
from flink_agents.integrations.embeddings import LocalEmbeddingModel
from flink_agents.integrations.vector_stores import (
    FieldMatch,
    FieldMatchAny,
    Filter,
    Point,
    point_id,
)
from flink_agents.integrations.vector_stores.edge import EdgeVectorStore

COLLECTION = "ltm_bench"
SET_NAME = "chat"

# --- generated memories -------------------------------------------------------------------

_SUBJECTS = ["I", "My sister", "My manager", "The customer", "Our team", "My doctor", "We"]
_VERBS = [
    "prefer",
    "dislike",
    "ordered",
    "cancelled",
    "asked about",
    "booked",
    "forgot",
    "recommended",
    "returned",
    "paid for",
    "complained about",
    "want to try",
]
_OBJECTS = [
    "green tea",
    "a window seat",
    "the vegetarian menu",
    "express shipping",
    "a refund for order {n}",
    "the blue jacket in size M",
    "a morning appointment",
    "the premium plan",
    "two tickets to Lisbon",
    "the noise-cancelling headphones",
    "a table for four",
    "the invoice from March",
    "dark roast coffee",
    "a hotel near the station",
    "the yoga class on Tuesdays",
    "paper receipts",
    "the Python course",
]
_TAILS = [
    "",
    "last week",
    "because it was cheaper",
    "for the trip in {month}",
    "and mentioned it twice",
    "but only on weekdays",
    "after the delay",
    "again today",
    "since the price went up",
    "for their anniversary",
    "before the meeting at {h}:00",
]
_MONTHS = ["January", "April", "June", "September", "November"]


def sentences(rng: random.Random, count: int) -> list[str]:
    """``count`` short first-person memories, like what an assistant stores about a user."""
    out = []
    for _ in range(count):
        text = " ".join(
            part
            for part in (
                rng.choice(_SUBJECTS),
                rng.choice(_VERBS),
                rng.choice(_OBJECTS),
                rng.choice(_TAILS),
            )
            if part
        )
        out.append(
            text.format(n=rng.randint(1000, 99999), month=rng.choice(_MONTHS), h=rng.randint(8, 18))
            + "."
        )
    return out


# --- store-level helpers ------------------------------------------------------------------


def payload(index: int, keys: int, text: str) -> dict[str, Any]:
    """What long-term memory stores with an item (see ``long_term._codec.item_payload``)."""
    created = 1.7e9 + index
    return {
        "kind": "item",
        "key": f"user-{index % keys}",
        "set": SET_NAME,
        "item_type": "str",
        "value": text,
        "created_start": created,
        "created_time": created,
        "last_accessed_time": created,
        "tags": [f"t{index % 7}"],
        "tag_weights": {f"t{index % 7}": 1.0},
    }


def key_filter(key: str) -> Filter:
    """The filter ``MemorySet.search`` sends for one key's set."""
    return Filter(
        must=[
            FieldMatch("key", key),
            FieldMatch("set", SET_NAME),
            FieldMatchAny("kind", ["item", "compacted"]),
        ]
    )


def noisy(base: np.ndarray, rng: np.random.Generator, count: int, sigma: float) -> np.ndarray:
    """``count`` unit vectors: sample vectors (cycled) plus N(0, sigma) per dimension."""
    picked = base[np.arange(count) % len(base)]
    out = picked + rng.normal(0.0, sigma, picked.shape).astype(np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def batches(total: int, size: int) -> Iterator[tuple[int, int]]:
    for start in range(0, total, size):
        yield start, min(size, total - start)


def add_embedded(
    store: EdgeVectorStore,
    model: LocalEmbeddingModel,
    texts: Sequence[str],
    first: int,
    per_call: int,
    keys: int,
) -> tuple[float, list[list[float]]]:
    """Embed and upsert ``texts`` ``per_call`` at a time; seconds spent and the vectors."""
    vectors: list[list[float]] = []
    began = time.perf_counter()
    for start, count in batches(len(texts), per_call):
        chunk = texts[start : start + count]
        embedded = model.embed(chunk)
        store.upsert(
            COLLECTION,
            [
                Point(point_id("ltm", first + start + j), v, payload(first + start + j, keys, t))
                for j, (t, v) in enumerate(zip(chunk, embedded, strict=True))
            ],
        )
        vectors.extend(embedded)
    return time.perf_counter() - began, vectors


def add_vectors(
    store: EdgeVectorStore,
    vectors: np.ndarray,
    texts: Sequence[str],
    first: int,
    per_call: int,
    keys: int,
) -> float:
    """Upsert ready vectors ``per_call`` at a time; seconds inside ``store.upsert`` only."""
    spent = 0.0
    for start, count in batches(len(vectors), per_call):
        points = [
            Point(
                point_id("ltm", first + start + j),
                vectors[start + j].tolist(),
                payload(first + start + j, keys, texts[(start + j) % len(texts)]),
            )
            for j in range(count)
        ]
        began = time.perf_counter()
        store.upsert(COLLECTION, points)
        spent += time.perf_counter() - began
    return spent


def row(label: str, ms: list[float]) -> str:
    return (
        f"  {label:<54} p50 {pct(ms, 50):7.3f} ms  p95 {pct(ms, 95):7.3f} ms  "
        f"mean {statistics.fmean(ms):7.3f} ms  (n={len(ms)})"
    )


def rate(label: str, items: int, seconds: float) -> str:
    return f"  {label:<54} {items / seconds:>9,.0f} items/s  ({items:,} in {seconds:.2f} s)"


def search_rows(
    store: EdgeVectorStore,
    model: LocalEmbeddingModel,
    queries: list[str],
    query_vectors: list[list[float]],
    keys: list[str],
    mode: str,
) -> list[str]:
    def bare(n: int) -> object:
        return store.search(COLLECTION, query_vectors[n], 10, key_filter(keys[n]))

    def embedded(n: int) -> object:
        vector = model.embed_one(queries[n])
        return store.search(COLLECTION, vector, 10, key_filter(keys[n]))

    hits = bare(0)
    assert isinstance(hits, list) and 0 < len(hits) <= 10, "a key's search found nothing"
    rows = [row(f"search, embedding excluded ({mode})", latencies(len(queries), bare))]
    model.clear_query_cache()  # held-out queries, each embedded by the model
    rows.append(row(f"search, embedding included ({mode})", latencies(len(queries), embedded)))
    rows.append(
        row(f"search, repeated queries, cache hits ({mode})", latencies(len(queries), embedded))
    )
    return rows


def measure_store(
    points: int,
    model: LocalEmbeddingModel,
    sample: list[str],
    queries: list[str],
    query_vectors: list[list[float]],
    args: argparse.Namespace,
) -> list[str]:
    rng = np.random.default_rng(points)
    keys = [f"user-{k}" for k in rng.integers(0, args.keys, len(queries))]
    rows = [f"{points:,} items, {args.keys} keys ({points // args.keys} per key)"]
    with (
        tempfile.TemporaryDirectory(prefix="bench-ltm-") as directory,
        EdgeVectorStore(directory) as store,
    ):
        store.ensure_collection(COLLECTION, model.dimension, model.model_id)
        singles = sample[: args.single]
        seconds, single_vectors = add_embedded(store, model, singles, 0, 1, args.keys)
        rows.append(rate("add, embedding included, 1 per call", len(singles), seconds))
        rest = sample[args.single :]
        seconds, vectors = add_embedded(store, model, rest, len(singles), args.batch, args.keys)
        rows.append(rate(f"add, embedding included, {args.batch} per call", len(rest), seconds))
        base = np.asarray(single_vectors + vectors, dtype=np.float32)
        filled = noisy(base, rng, points - len(sample), args.noise)
        # New points only (no overwrites): the first few one per call, the rest in batches.
        ones = min(len(filled) // 2, args.single * 5)
        first = len(sample)
        for per_call, part in ((1, filled[:ones]), (args.batch, filled[ones:])):
            seconds = add_vectors(store, part, sample, first, per_call, args.keys)
            rows.append(rate(f"add, embedding excluded, {per_call} per call", len(part), seconds))
            first += len(part)
        assert store.count(COLLECTION) == points, store.count(COLLECTION)
        model.clear_query_cache()
        rows.append(
            row(
                "query embedding alone (embed_one)",
                latencies(len(queries), lambda n: model.embed_one(queries[n])),
            )
        )
        rows += search_rows(store, model, queries, query_vectors, keys, "exact")
        if args.optimize:
            began = time.perf_counter()
            store.optimize(COLLECTION)
            rows.append(f"  optimize() (HNSW): {time.perf_counter() - began:.1f} s")
            rows += search_rows(store, model, queries, query_vectors, keys, "hnsw")
    return rows


class TableEmbedding(BaseEmbeddingModel):
    """The real model's id and size; a text found in ``rows`` gets ``vectors[rows[text]]``
    (fill items, pre-embedded queries), any other text the real model's vector."""

    def __init__(self, real: LocalEmbeddingModel, vectors: np.ndarray, rows: dict[str, int]):
        self.real, self.vectors, self.rows = real, vectors, rows

    @property
    def model_id(self) -> str:
        return self.real.model_id

    @property
    def dimension(self) -> int:
        return self.real.dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        texts = list(texts)
        missing = [t for t in texts if t not in self.rows]
        computed = dict(zip(missing, self.real.embed(missing), strict=True)) if missing else {}
        return [
            computed[t] if t in computed else self.vectors[self.rows[t]].tolist() for t in texts
        ]


def measure_api(
    points: int,
    model: LocalEmbeddingModel,
    sample: list[str],
    queries: list[str],
    query_vectors: list[list[float]],
    args: argparse.Namespace,
) -> list[str]:
    """The same figures through ``MemorySet.add``/``search`` (``VectorLongTermMemory``)."""
    try:
        from flink_agents.memory.long_term import MEMORY_COLLECTION, VectorLongTermMemory
    except ImportError as exc:
        return [f"long-term memory API: not measured ({exc})"]
    rng = np.random.default_rng(points + 1)
    rows = [f"{points:,} items through MemorySet (VectorLongTermMemory, track_access on)"]
    with (
        tempfile.TemporaryDirectory(prefix="bench-ltm-api-") as directory,
        EdgeVectorStore(directory) as store,
    ):
        filled_texts = [f"{sample[i % len(sample)]} (#{i})" for i in range(points - len(sample))]
        table = TableEmbedding(model, np.empty((0, model.dimension), np.float32), {})
        real = VectorLongTermMemory(store, model)
        tabled = VectorLongTermMemory(store, table)  # same model id: one collection
        quiet = VectorLongTermMemory(store, model, track_access=False)
        touches: list[float] = []
        for memory in (real, tabled):
            memory.access._touch = timed(memory.access._touch, touches)
        try:
            user_keys = [f"user-{k}" for k in range(args.keys)]
            by_table = {k: tabled.for_key(k).create_memory_set(SET_NAME) for k in user_keys}
            by_model = {k: real.for_key(k).get_memory_set(SET_NAME) for k in user_keys}
            by_quiet = {k: quiet.for_key(k).get_memory_set(SET_NAME) for k in user_keys}

            singles = sample[: args.single]
            began = time.perf_counter()
            for n, text in enumerate(singles):
                by_model[user_keys[n % args.keys]].add(text)
            rows.append(
                rate(
                    "add, embedding included, 1 per call", len(singles), time.perf_counter() - began
                )
            )
            rest = sample[args.single :]
            began = time.perf_counter()
            for n, (start, count) in enumerate(batches(len(rest), args.batch)):
                by_model[user_keys[n % args.keys]].add(items=rest[start : start + count])
            rows.append(
                rate(
                    f"add, embedding included, {args.batch} per call",
                    len(rest),
                    time.perf_counter() - began,
                )
            )

            base = np.asarray(model.embed(sample), dtype=np.float32)
            table.vectors = np.concatenate(
                [noisy(base, rng, len(filled_texts), args.noise), np.asarray(query_vectors)]
            ).astype(np.float32)
            table.rows = {t: i for i, t in enumerate(filled_texts + queries)}
            ones = min(len(filled_texts) // 2, args.single * 5)
            began = time.perf_counter()
            for n, text in enumerate(filled_texts[:ones]):
                by_table[user_keys[n % args.keys]].add(text)
            rows.append(
                rate("add, embedding excluded, 1 per call", ones, time.perf_counter() - began)
            )
            rest = filled_texts[ones:]
            began = time.perf_counter()
            for n, (start, count) in enumerate(batches(len(rest), args.batch)):
                by_table[user_keys[n % args.keys]].add(items=rest[start : start + count])
            rows.append(
                rate(
                    f"add, embedding excluded, {args.batch} per call",
                    len(rest),
                    time.perf_counter() - began,
                )
            )
            stored = store.count(MEMORY_COLLECTION) - args.keys  # one settings point per set
            assert stored == points, stored

            # Keys that hold items (all of them at 10k and above; not in a tiny smoke run).
            used = sorted({user_keys[n % args.keys] for n in range(len(rest) // args.batch + 1)})
            keys = [used[k] for k in rng.integers(0, len(used), len(queries))]
            for mode in ("exact", "hnsw"):
                if mode == "hnsw":
                    if not args.optimize:
                        break
                    began = time.perf_counter()
                    store.optimize(MEMORY_COLLECTION)
                    rows.append(f"  optimize() (HNSW): {time.perf_counter() - began:.1f} s")
                found = by_table[keys[0]].search(queries[0], 10)
                assert 0 < len(found) <= 10, "a key's search found nothing"
                for label, sets in (
                    ("embedding excluded", by_table),
                    ("embedding included", by_model),
                    ("embedding included, track_access off", by_quiet),
                    ("repeated queries, cache hits", by_model),
                ):
                    if label.startswith("embedding included"):
                        model.clear_query_cache()  # held-out queries: the model runs
                    touches.clear()
                    ms = latencies(
                        len(queries), lambda n, sets=sets: sets[keys[n]].search(queries[n], 10)
                    )
                    rows.append(row(f"search, {label} ({mode})", ms))
                    real.wait_for_compaction(60)  # access records, written in the background
                    tabled.wait_for_compaction(60)
                    if touches:
                        rows.append(
                            f"    access records written: {len(touches)} sets, touch p50 "
                            f"{pct(sorted(touches), 50):.3f} ms, {sum(touches):.0f} ms in all"
                        )
        finally:
            real.close()
            tabled.close()
            quiet.close()
    return rows


def timed(touch: Any, spent: list[float]) -> Any:
    """``touch`` that appends the milliseconds of each call to ``spent``."""

    def call(*args: Any) -> None:
        began = time.perf_counter()
        touch(*args)
        spent.append((time.perf_counter() - began) * 1000)

    return call


def machine() -> list[str]:
    with open("/proc/cpuinfo") as info:
        cpu = next(
            (line.split(":", 1)[1].strip() for line in info if line.startswith("model name")),
            platform.processor(),
        )
    with open("/proc/meminfo") as info:
        kib = int(next(line.split()[1] for line in info if line.startswith("MemTotal")))
    versions = " ".join(
        f"{name}={version(name)}"
        for name in ("qdrant-edge-py", "onnxruntime", "tokenizers", "numpy")
    )
    return [
        f"date {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"cpus={os.cpu_count()} cpu={cpu!r} ram={kib / 1024 / 1024:.1f} GiB "
        f"python={platform.python_version()}",
        versions,
    ]


def load_average() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", default="10000,100000", help="comma-separated sizes")
    parser.add_argument("--sample", type=int, default=3000, help="sentences really embedded")
    parser.add_argument("--single", type=int, default=300, help="of them, added one per call")
    parser.add_argument("--batch", type=int, default=32, help="items per add call")
    parser.add_argument("--queries", type=int, default=1000, help="timed searches per kind")
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--noise", type=float, default=0.01, help="per-dimension sigma")
    parser.add_argument("--optimize", action="store_true", help="also time optimize() (slow)")
    parser.add_argument("--api", action="store_true", help="also through MemorySet")
    args = parser.parse_args()
    sizes = [int(s) for s in args.points.split(",") if s.strip()]
    if args.single >= args.sample or args.sample > min(sizes):
        parser.error("need --single < --sample <= the smallest --points")

    for line in machine():
        print(line)
    print(f"load average at start: {load_average()}")
    print(
        f"keys={args.keys} sample={args.sample} (single={args.single}) batch={args.batch} "
        f"queries={args.queries} noise={args.noise}",
        flush=True,
    )
    texts = sentences(random.Random(7), args.sample + args.queries)
    sample, queries = texts[: args.sample], texts[args.sample :]
    model = LocalEmbeddingModel()
    began = time.perf_counter()
    model.embed(["warm up"])
    print(f"model load + first embed: {time.perf_counter() - began:.2f} s")
    query_vectors = model.embed(queries)
    # onnxruntime's default uses every core; one thread may do better on a busy machine.
    single = LocalEmbeddingModel(threads=1)
    for text in queries[:20]:  # warm both up: first runs allocate
        model.embed_one(text)
        single.embed_one(text)
    for label, embedder in (("threads=None (default)", model), ("threads=1", single)):
        embedder.clear_query_cache()
        ms = latencies(len(queries), lambda n, e=embedder: e.embed_one(queries[n]))
        print(row(f"query embedding alone, {label}", ms), flush=True)
    for points in sizes:
        for line in measure_store(points, model, sample, queries, query_vectors, args):
            print(line, flush=True)
        print(f"load average now: {load_average()}", flush=True)
    if args.api:
        for points in sizes:
            for line in measure_api(points, model, sample, queries, query_vectors, args):
                print(line, flush=True)
            print(f"load average now: {load_average()}", flush=True)


if __name__ == "__main__":
    main()
