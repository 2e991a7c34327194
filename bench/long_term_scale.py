"""Benchmark: long-term memory at a million items over 100,000 keys (issue 45, goal 5).

No Flink for the first four parts; one store, opened as every runner opens it
(``open_vector_store`` on ``<data-dir>/vector-store``: the embedded engine, hosted by the
first process to open it), and the offline model (``LocalEmbeddingModel``).

1. **Fill** ``--items`` items over ``--keys`` keys (item ``i`` goes to key ``i % keys``), one
   item per action as a job's actions add them: a fresh ``IdMinter`` per item with an
   action's identity, ``for_key(key, ids).create_memory_set(...).add(text)``, at most
   ``--max-storing`` actions waiting for their items to land (the runtime's
   ``long-term-memory-max-storing``), each memory with its own ``EmbeddingBatcher`` as the
   runtime makes it. The first ``--sample`` items go through the real model (add,
   embedding included); the rest reuse their vectors plus noise (``noisy``, sigma
   ``--noise``) through ``TableEmbedding`` (add, embedding excluded), per slice of
   ``--slice`` items: the curve of add rate, RSS and disk size as the store grows, and a
   search probe at each slice's end. Then ``--direct`` points are upserted straight into the
   store (one per call, as the batcher writes them): the store's own rate at this size.
2. **Search** at full size, the library's defaults (``get_memory_set`` + ``search``, limit
   10, access tracking on, exact search: nothing calls ``optimize``), for ``--queries``
   held-out sentences on random keys: embedding included (the model's query cache cleared
   first, so every query runs the model) and excluded (the query's vector from a table);
   also the store's filtered search alone, the query embedding alone, and the search with
   the model on one onnxruntime thread (``LocalEmbeddingModel(threads=1)``, not the
   default), with the CPU time of each call (every thread of the process).
3. **Compaction**: ``--compaction-keys`` keys get a second set with capacity
   ``--capacity`` (TRIM, the default strategy; a set over capacity is scheduled for a pass
   after each add lands), filled to capacity first, then adds go on paced at each rate of
   ``--compaction-rates`` (``included``/``excluded``: the two add rates measured in part 1,
   or a number) for ``--compaction-seconds``: every ``--sample-every`` seconds, the items
   over capacity (stored items of that set less what full compaction would leave) and the
   passes done; then how long compaction takes to drain after the adds stop.
4. **Rescale**: what a rescale changes is which process serves a key. Every subtask of a
   machine opens the one store directory (the first hosts it, the others call it over a
   Unix socket), so a key's items do not move; its new subtask opens the store afresh and,
   with a fresh ``MemoryCore``, reads the set's settings from the store. So this process
   closes the store (the old job ends), then ``--rescale-processes`` fresh processes (a
   job restored at that parallelism in process mode) open it, each checking the keys a
   key-group split gives it (``--check-keys`` keys, every item of each:
   ``get_memory_set`` + ``get_recent`` of more than the key holds, ids and texts
   compared), and each reports the time to its first answer (the host opens the 1M
   collection).
5. **A real Flink rescale**, smaller (``--flink-items`` over ``--flink-keys`` keys): the job
   of ``tests/memory/long_term/test_rescale.py`` (``rescale_job``, ``RescaleAgent``,
   default configuration, process mode) adds the items at parallelism 2, is stopped with a
   savepoint and restored at parallelism 1, where each key recalls: every item
   (``get_recent``), one searched by its own text, and its operation count in short-term
   memory (Flink state came through the savepoint). ``--flink-items 0`` skips it.

Headline figures go to ``$BENCH_FIGURES`` (``bench._common.record_figure``). Nothing asserts
on time; the rescale checks and the counts are asserted.

    PYTHONPATH=$PWD .venv/bin/python -m bench.long_term_scale [--items 1000000] \\
        [--keys 100000] [--flink-items 10000]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench._common import record_figure, source_fingerprint, table
from bench.long_term_memory import (
    SET_NAME,
    TableEmbedding,
    key_filter,
    load_average,
    machine,
    noisy,
    sentences,
)
from bench.vector_store import latencies, pct
from flink_agents.integrations.embeddings import LocalEmbeddingModel
from flink_agents.integrations.vector_stores import (
    FieldMatch,
    FieldMatchAny,
    Filter,
    Point,
    VectorStore,
    open_vector_store,
    point_id,
)
from flink_agents.memory import IdMinter
from flink_agents.memory.long_term import MEMORY_COLLECTION, EmbeddingBatcher, VectorLongTermMemory

REPO = Path(__file__).resolve().parent.parent
JOB = "bench-long-term-scale"
RECENT = "recent"  # the compaction part's set (SET_NAME holds the filled items)
MAX_PARALLELISM = 128  # Flink's default for small parallelism: key groups per job

# --- what is stored where -----------------------------------------------------------------


@dataclass(frozen=True)
class ItemPlan:
    """Item ``i`` of ``items``: key ``user-{i % keys}``; text ``sample[i]`` for the embedded
    sample, else ``sample[i % len(sample)]`` tagged with ``i``; id as an action's
    (``identity``)."""

    items: int
    keys: int
    sample: tuple[str, ...]

    def key(self, i: int) -> str:
        return f"user-{i % self.keys}"

    def text(self, i: int) -> str:
        s = len(self.sample)
        return self.sample[i] if i < s else f"{self.sample[i % s]} (#{i})"

    def identity(self, i: int, set_name: str = SET_NAME) -> tuple[str | int, ...]:
        """The identity of the action that added item ``i`` (job, key, run, step, action)."""
        return (JOB, self.key(i), i, 0, f"remember-{set_name}")

    def item_id(self, i: int) -> str:
        return point_id(*self.identity(i), "ltm", SET_NAME, 0)

    def expected(self, key_index: int) -> dict[str, str]:
        """The ids and texts key ``key_index`` holds in ``SET_NAME``."""
        return {self.item_id(i): self.text(i) for i in range(key_index, self.items, self.keys)}


# --- adding as actions do -------------------------------------------------------------------


class Adder:
    """Adds one item per action through ``memory`` (the runtime's path: an ``IdMinter`` per
    action, ``for_key``, ``create_memory_set``, ``add``), keeping at most ``max_storing``
    actions waiting for their items to land, as a job parks them. ``landed(key)`` is
    called on the batcher's thread as each item lands."""

    def __init__(
        self,
        memory: VectorLongTermMemory,
        max_storing: int,
        *,
        capacity: int | None = None,
        landed: Callable[[str], None] | None = None,
    ) -> None:
        self.memory, self.max_storing, self.capacity = memory, max_storing, capacity
        self.landed = landed
        self.waiting: deque[Future[None]] = deque()

    def add(self, identity: tuple[str | int, ...], set_name: str, text: str) -> None:
        ids = IdMinter(identity)
        key = str(identity[1])
        view = self.memory.for_key(key, ids)
        view.create_memory_set(set_name, str, self.capacity).add(text)
        landing = ids.landing()
        if landing is None:
            return
        if self.landed is not None:
            landing.add_done_callback(lambda _, key=key: self.landed(key))
        self.waiting.append(landing)
        while len(self.waiting) > self.max_storing:
            self.waiting.popleft().result()

    def drain(self) -> None:
        while self.waiting:
            self.waiting.popleft().result()


def rss_mib(field: str = "VmRSS") -> float:
    """This process's resident set now (``VmHWM``: its peak), MiB."""
    with open("/proc/self/status") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith(field + ":"))
    return kib / 1024


def peak_rss_mib() -> float:
    """Peak RSS from ``/proc`` (``ru_maxrss`` would count the parent's across ``exec``)."""
    return rss_mib("VmHWM")


def thread_cpu() -> dict[str, float]:
    """CPU seconds of this process's Python threads by name (numbers stripped: a pool's
    threads together), and of its other threads (the engine's, onnxruntime's) as one."""
    ticks = os.sysconf("SC_CLK_TCK")
    names = {t.native_id: t.name.rstrip("_0123456789") for t in threading.enumerate()}
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):
            with open(f"/proc/self/task/{tid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            name = names.get(int(tid), "other (native)")
            out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
    return out


def disk_mib(directory: Path) -> float:
    """Space the directory's files take on disk (allocated blocks)."""
    total = 0
    for root, _, files in os.walk(directory):
        for name in files:
            with contextlib.suppress(FileNotFoundError):  # a segment merged away meanwhile
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total / 2**20


# --- 1. fill ------------------------------------------------------------------------------


@dataclass
class SliceRow:
    upto: int
    items: int
    seconds: float
    cpu: float
    """CPU seconds of this process (every thread) adding them: the cost, whatever the load"""
    rss: float
    rss_anon: float
    """of ``rss``, what no file backs (the rest: the engine's mapped files, reclaimable)"""
    disk: float
    load: str
    search_excluded_p95: float = 0.0
    search_included_p95: float = 0.0

    @property
    def rate(self) -> float:
        return self.items / self.seconds

    @property
    def cpu_us(self) -> float:
        return self.cpu * 1e6 / self.items


@dataclass
class Setup:
    """What every part uses: the store, the model, the memories and the texts."""

    args: argparse.Namespace
    directory: Path
    store: VectorStore
    model: LocalEmbeddingModel
    plan: ItemPlan
    queries: list[str]
    query_vectors: np.ndarray
    real: VectorLongTermMemory  # the real model (embedding included)
    table: TableEmbedding  # the fill's vectors by text (embedding excluded)
    tabled: VectorLongTermMemory
    queried: VectorLongTermMemory  # searches with the queries' vectors from a table
    one_thread: LocalEmbeddingModel  # on one onnxruntime thread (not the default)
    single: VectorLongTermMemory  # with ``one_thread``
    batchers: list[EmbeddingBatcher]
    base: np.ndarray | None = None  # the sample's vectors


def fill_sample(setup: Setup) -> float:
    """Add the sample through the real model; its items/s. Keeps its vectors in ``base``."""
    plan, sample = setup.plan, len(setup.plan.sample)
    adder = Adder(setup.real, setup.args.max_storing)
    began = time.perf_counter()
    for i in range(sample):
        adder.add(plan.identity(i), SET_NAME, plan.text(i))
    adder.drain()
    seconds = time.perf_counter() - began
    records = setup.store.get(
        MEMORY_COLLECTION, [plan.item_id(i) for i in range(sample)], with_vectors=True
    )
    by_id = {r.id: r.vector for r in records}
    setup.base = np.asarray([by_id[plan.item_id(i)] for i in range(sample)], np.float32)
    return sample / seconds


def fill_slice(setup: Setup, start: int, end: int, adder: Adder) -> tuple[float, float]:
    """Add items ``start`` to ``end`` with their vectors from the table; seconds taken, and
    this process's CPU seconds."""
    plan = setup.plan
    setup.table.vectors = vectors_for(setup, start, end - start)
    setup.table.rows = {plan.text(i): i - start for i in range(start, end)}
    began, cpu = time.perf_counter(), time.process_time()
    for i in range(start, end):
        adder.add(plan.identity(i), SET_NAME, plan.text(i))
    adder.drain()
    return time.perf_counter() - began, time.process_time() - cpu


def vectors_for(setup: Setup, first: int, count: int) -> np.ndarray:
    """Vectors of items ``first`` to ``first + count``: item ``i`` gets the vector of sample
    item ``i % len(sample)`` plus noise, made 10,000 at a time (``noisy`` draws float64)."""
    base, chunk = sample_vectors(setup), 10_000
    rng = np.random.default_rng(first)
    out = np.empty((count, base.shape[1]), np.float32)
    for start in range(0, count, chunk):
        rolled = np.roll(base, -((first + start) % len(base)), axis=0)
        n = min(chunk, count - start)
        out[start : start + n] = noisy(rolled, rng, n, setup.args.noise)
    return out


def fill(setup: Setup) -> tuple[float, list[SliceRow]]:
    """The sample, then the rest slice by slice; the sample's rate and a row per slice."""
    args, plan = setup.args, setup.plan
    included = fill_sample(setup)
    print(f"  sample of {len(plan.sample):,} embedded: {included:,.0f} items/s", flush=True)
    adder = Adder(setup.tabled, args.max_storing)
    rows = []
    start = len(plan.sample)
    while start < plan.items:
        end = min(plan.items, (start // args.slice + 1) * args.slice)
        seconds, cpu = fill_slice(setup, start, end, adder)
        row = SliceRow(
            end,
            end - start,
            seconds,
            cpu,
            rss_mib(),
            rss_mib("RssAnon"),
            disk_mib(setup.directory),
            load_average(),
        )
        row.search_excluded_p95, row.search_included_p95 = search_probe(setup, end)
        rows.append(row)
        print(
            f"  to {end:>9,}: {row.rate:>7,.0f} items/s  CPU {row.cpu_us:,.0f} us/item  "
            f"rss {row.rss:,.0f} MiB (anon {row.rss_anon:,.0f})  "
            f"disk {row.disk:,.0f} MiB  search p95 excl/incl {row.search_excluded_p95:.2f}/"
            f"{row.search_included_p95:.2f} ms  load {row.load}",
            flush=True,
        )
        start = end
    return included, rows


def direct_upserts(setup: Setup) -> float:
    """``--direct`` points straight into the store, one per call (as the batcher writes
    each action's item), each with a stored item's payload under a key no other part reads;
    items/s inside ``upsert``."""
    count, base = setup.args.direct, sample_vectors(setup)
    vectors = vectors_for(setup, 0, count)
    template = setup.store.get(MEMORY_COLLECTION, [setup.plan.item_id(len(base))])[0].payload
    template.pop("last_accessed_time", None)
    spent = 0.0
    for j in range(count):
        text = setup.plan.sample[j % len(base)]
        point = Point(
            point_id(JOB, "direct", j),
            vectors[j].tolist(),
            {**template, "key": f"direct-{j}", "value": text, "created_time": time.time()},
        )
        began = time.perf_counter()
        setup.store.upsert(MEMORY_COLLECTION, [point])
        spent += time.perf_counter() - began
    return count / spent


def sample_vectors(setup: Setup) -> np.ndarray:
    """The vectors the model gave the sample (``fill_sample`` reads them back)."""
    assert setup.base is not None, "the sample is not stored yet"
    return setup.base


# --- 2. search ----------------------------------------------------------------------------


def query_keys(setup: Setup, count: int, upto: int, seed: int) -> list[str]:
    """``count`` random keys that hold items among the first ``upto``."""
    rng = np.random.default_rng(seed)
    return [f"user-{k}" for k in rng.integers(0, min(upto, setup.plan.keys), count)]


def search_probe(setup: Setup, upto: int) -> tuple[float, float]:
    """p95 of ``--probe-queries`` searches, embedding excluded and included (defaults)."""
    n = setup.args.probe_queries
    if n == 0:
        return 0.0, 0.0
    keys = query_keys(setup, n, upto, upto)
    queries = setup.queries[:n]
    excluded = latencies(n, lambda q: api_search(setup.queried, keys[q], queries[q]))
    setup.model.clear_query_cache()
    included = latencies(n, lambda q: api_search(setup.real, keys[q], queries[q]))
    return pct(excluded, 95), pct(included, 95)


def api_search(memory: VectorLongTermMemory, key: str, query: str) -> list[Any]:
    """What an action does: open its key's set, search it (limit 10, defaults)."""
    return memory.for_key(key).get_memory_set(SET_NAME).search(query)


@dataclass
class Timed:
    """Sorted milliseconds of calls, and this process's CPU milliseconds per call (every
    thread's, onnxruntime's included: what a call costs whatever the load)."""

    ms: list[float]
    cpu_ms: float


def timed_calls(n: int, call: Callable[[int], object]) -> Timed:
    cpu = time.process_time()
    ms = latencies(n, call)
    return Timed(ms, (time.process_time() - cpu) * 1000 / n)


def search_at_size(setup: Setup) -> dict[str, Timed]:
    """Each search kind's timings at full size."""
    n, store, model = len(setup.queries), setup.store, setup.model
    keys = query_keys(setup, n, setup.plan.items, 45)
    queries, vectors = setup.queries, setup.query_vectors
    found = api_search(setup.real, keys[0], queries[0])
    assert 0 < len(found) <= 10, f"a key's search found {len(found)} items"
    out = {}
    model.clear_query_cache()
    out["query embedding alone (embed_one)"] = timed_calls(n, lambda q: model.embed_one(queries[q]))
    out["store search alone (filter: key, set, kinds)"] = timed_calls(
        n, lambda q: store.search(MEMORY_COLLECTION, vectors[q].tolist(), 10, key_filter(keys[q]))
    )
    out["search, embedding excluded"] = timed_calls(
        n, lambda q: api_search(setup.queried, keys[q], queries[q])
    )
    model.clear_query_cache()
    out["search, embedding included (defaults)"] = timed_calls(
        n, lambda q: api_search(setup.real, keys[q], queries[q])
    )
    setup.one_thread.clear_query_cache()
    out["search, embedding included, model on 1 thread"] = timed_calls(
        n, lambda q: api_search(setup.single, keys[q], queries[q])
    )
    out["search, repeated queries (query cache hits)"] = timed_calls(
        n, lambda q: api_search(setup.real, keys[q], queries[q])
    )
    for memory in (setup.real, setup.queried, setup.single):
        memory.wait_for_compaction(60)  # the access records the searches queued
    return out


# --- 3. compaction ------------------------------------------------------------------------


class Backlog:
    """Items landed per key in the capacity set; what full compaction would leave of them."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.lock = threading.Lock()
        self.per_key: dict[str, int] = {}
        self.landed = 0
        self.bounded = 0  # sum over keys of min(landed, capacity)

    def __call__(self, key: str) -> None:
        with self.lock:
            before = self.per_key.get(key, 0)
            self.per_key[key] = before + 1
            self.landed += 1
            if before < self.capacity:
                self.bounded += 1


class Passes:
    """A ``LongTermObserver`` counting compaction passes."""

    def __init__(self) -> None:
        self.done = 0

    def long_term_memory_added(self, n: int = 1) -> None:
        pass

    def long_term_memory_searched(self) -> None:
        pass

    def long_term_memory_compacted(self) -> None:
        self.done += 1


@dataclass
class CompactionRun:
    rate: float
    label: str
    achieved: float = 0.0
    samples: list[tuple[float, int, int, int]] = field(default_factory=list)
    """(seconds since the paced adds began, items added, items over capacity, passes)"""
    drain_seconds: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds by thread while the adds were paced"""
    added: int = 0
    passes: int = 0
    """compaction passes done while the adds were paced"""

    def growth(self) -> float:
        """Items over capacity gained per second over the paced run's second half (least
        squares): about 0 while compaction keeps up."""
        end = self.samples[-2][0] if len(self.samples) > 2 else 0.0
        late = [(t, o) for t, _, o, _ in self.samples[:-1] if t >= end / 2]
        if len(late) < 2:
            return 0.0
        slope, _ = np.polyfit([t for t, _ in late], [o for _, o in late], 1)
        return float(slope)

    def mean_wait(self) -> float:
        """Seconds an item over capacity waits for its pass, on average (Little's law: the
        mean backlog over the rate at which items go over capacity, every add once full)."""
        paced = [o for _, _, o, _ in self.samples[:-1]]
        return statistics.fmean(paced) / self.achieved if paced and self.achieved else 0.0


def stored_in(store: VectorStore, set_name: str) -> int:
    return store.count(
        MEMORY_COLLECTION,
        Filter(must=[FieldMatch("set", set_name), FieldMatchAny("kind", ["item", "compacted"])]),
    )


class Workload:
    """Adds to the capacity set of ``keys`` keys, one item per action, through a memory of
    its own (its compaction pool, its batcher), counting what lands and the passes."""

    def __init__(self, setup: Setup, keys: int, total: int) -> None:
        args = setup.args
        self.store, self.keys, self.next = setup.store, keys, 0
        self.backlog, self.passes = Backlog(args.capacity), Passes()
        self.batcher = EmbeddingBatcher(setup.table)
        self.memory = VectorLongTermMemory(setup.store, setup.table, batcher=self.batcher)
        self.memory.observer = self.passes
        self.adder = Adder(self.memory, args.max_storing, capacity=args.capacity)
        self.adder.landed = self.backlog
        s, pool = len(setup.plan.sample), 20_000  # items share a pool of vectors
        setup.table.vectors = vectors_for(setup, setup.plan.items, pool)
        self.texts = [f"{setup.plan.sample[j % s]} (c{j})" for j in range(total)]
        setup.table.rows = {t: j % pool for j, t in enumerate(self.texts)}

    def add(self) -> None:
        j = self.next
        key = f"user-{j % self.keys}"
        self.adder.add((JOB, key, j, 1, "remember-recent"), RECENT, self.texts[j])
        self.next += 1

    def over_capacity(self) -> int:
        """Items stored in the set beyond what full compaction would leave."""
        with self.backlog.lock:
            bounded = self.backlog.bounded
        return stored_in(self.store, RECENT) - bounded

    def close(self) -> None:
        self.memory.close()
        self.batcher.close()


def compaction(setup: Setup, rates: dict[str, float]) -> list[CompactionRun]:
    """Fill the capacity set of ``--compaction-keys`` keys to capacity, then add paced at
    each rate and watch the items over capacity."""
    args = setup.args
    keys = min(args.compaction_keys, setup.plan.keys)
    total = keys * args.capacity + int(sum(rates.values()) * args.compaction_seconds * 1.1)
    work = Workload(setup, keys, total)
    began = time.perf_counter()
    try:
        for _ in range(keys * args.capacity):
            work.add()
        work.adder.drain()
        print(
            f"  {keys:,} sets filled to capacity {args.capacity} in "
            f"{time.perf_counter() - began:.1f} s",
            flush=True,
        )
        return [paced(work, CompactionRun(rate, label), args) for label, rate in rates.items()]
    finally:
        work.close()


def paced(work: Workload, run: CompactionRun, args: argparse.Namespace) -> CompactionRun:
    """Add at ``run.rate`` for ``--compaction-seconds``, sampling the items over capacity;
    then wait for compaction to drain."""
    first, cpu = work.next, thread_cpu()
    began = time.perf_counter()
    next_sample = 0.0
    while (now := time.perf_counter() - began) < args.compaction_seconds:
        if now >= next_sample:
            run.samples.append((now, work.next - first, work.over_capacity(), work.passes.done))
            next_sample += args.sample_every
        if work.next - first >= int(now * run.rate):  # ahead of the pace
            time.sleep(max(0.0, min(0.002, (work.next + 1 - first) / run.rate - now)))
            continue
        work.add()
    run.achieved = (work.next - first) / (time.perf_counter() - began)
    run.added, run.passes = work.next - first, work.passes.done - run.samples[0][3]
    after = thread_cpu()
    run.cpu = {name: after[name] - cpu.get(name, 0.0) for name in after}
    work.adder.drain()
    stopped = time.perf_counter()
    work.memory.wait_for_compaction(600)
    run.drain_seconds = time.perf_counter() - stopped
    end = time.perf_counter() - began
    run.samples.append((end, work.next - first, work.over_capacity(), work.passes.done))
    print(
        f"  {run.label}: target {run.rate:,.0f}/s, achieved {run.achieved:,.0f}/s; over "
        f"capacity max {max(s[2] for s in run.samples):,}, at the end "
        f"{run.samples[-1][2]:,} after a drain of {run.drain_seconds:.1f} s; load "
        f"{load_average()}",
        flush=True,
    )
    return run


# --- 4. rescale: fresh processes on the same store ----------------------------------------


def subtask_of(key: str, parallelism: int) -> int:
    """The subtask a key goes to at ``parallelism``: its key group (a stable hash of the key
    standing in for Flink's; the store looks at neither) and Flink's range split."""
    group = zlib.crc32(key.encode()) % MAX_PARALLELISM
    return group * parallelism // MAX_PARALLELISM


def check_keys(spec: dict[str, Any]) -> dict[str, Any]:
    """In a fresh process: open the store as a restored subtask does, and read back every
    item of the spec's keys; what was missing and how long it took."""
    began = time.perf_counter()
    store = open_vector_store(spec["store"])
    memory = VectorLongTermMemory(store, LocalEmbeddingModel())  # nothing is embedded
    plan = ItemPlan(spec["items"], spec["keys"], tuple(spec["sample"]))
    first: float | None = None
    missing = unexpected = items = 0
    ms = []
    for k in spec["check"]:
        want = plan.expected(k)
        t = time.perf_counter()
        found = memory.for_key(plan.key(k)).get_memory_set(SET_NAME).get_recent(len(want) + 1)
        ms.append((time.perf_counter() - t) * 1000)
        first = first if first is not None else time.perf_counter() - began
        got = {item.id: item.item for item in found}
        missing += sum(1 for i, text in want.items() if got.get(i) != text)
        unexpected += len(got.keys() - want.keys())
        items += len(want)
    memory.close()  # writes the reads it gathered (access records) while the host is up
    result = {
        "keys": len(spec["check"]),
        "items": items,
        "missing": missing,
        "unexpected": unexpected,
        "first_answer_s": first,
        "seconds": time.perf_counter() - began,
        "p50_ms": pct(sorted(ms), 50) if ms else 0.0,
        "p95_ms": pct(sorted(ms), 95) if ms else 0.0,
        "hosting": "yes" if getattr(store, "hosting", False) else "no",
        "rss_mib": peak_rss_mib(),
        "rss_anon_mib": rss_mib("RssAnon"),
    }
    # Every subtask serves until all are done, as in a job: a host leaving early would
    # have the others take the directory over (and open the collection) one after another.
    Path(spec["done"]).touch()
    deadline = time.monotonic() + 900
    while len(list(Path(spec["done"]).parent.glob("done-*"))) < spec["processes"]:
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    store.close()
    return result


def rescale(setup: Setup, location: str) -> list[dict[str, Any]]:
    """``--rescale-processes`` fresh processes each check their share of ``--check-keys``
    random keys (the store must already be closed here)."""
    args, plan = setup.args, setup.plan
    processes = args.rescale_processes
    rng = np.random.default_rng(3)
    count = min(args.check_keys, plan.keys)
    chosen = sorted(int(k) for k in rng.choice(plan.keys, count, replace=False))
    work = Path(tempfile.mkdtemp(prefix="bench-ltm-rescale-"))
    children = []
    for index in range(processes):
        spec = {
            "store": location,
            "items": plan.items,
            "keys": plan.keys,
            "sample": list(plan.sample),
            "check": [k for k in chosen if subtask_of(plan.key(k), processes) == index],
            "done": str(work / f"done-{index}"),
            "processes": processes,
        }
        path = work / f"check-{index}.json"
        path.write_text(json.dumps(spec))
        children.append(
            subprocess.Popen(
                [sys.executable, "-m", "bench.long_term_scale", "--check", str(path)],
                cwd=REPO,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    results = []
    for child in children:
        out, _ = child.communicate(timeout=3600)
        lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
        if child.returncode != 0 or not lines:
            raise RuntimeError(f"a rescale check failed (exit {child.returncode}):\n{out[-3000:]}")
        results.append(json.loads(lines[-1].removeprefix("RESULT ")))
    shutil.rmtree(work, ignore_errors=True)
    return results


# --- 5. a real Flink rescale --------------------------------------------------------------


def flink_rescale(args: argparse.Namespace) -> dict[str, Any]:
    """``--flink-items`` items added at parallelism 2 by the rescale test's job, stopped with
    a savepoint, restored at parallelism 1, where every key recalls everything."""
    items, keys = args.flink_items, args.flink_keys
    texts = [f"{t} (#{i})" for i, t in enumerate(sentences(random.Random(11), items))]
    remember = [
        {"id": f"r{i}", "key": f"user-{i % keys}", "op": "remember", "text": texts[i]}
        for i in range(items)
    ]
    per_key: dict[str, list[str]] = {}
    for record in remember:
        per_key.setdefault(record["key"], []).append(record["text"])
    recall = [
        {
            "id": f"recall-{key}",
            "key": key,
            "op": "recall",
            "queries": [own[0]],
            "fact_queries": [],
            "n": len(own) + 1,
        }
        for key, own in per_key.items()
    ]
    work = Path(tempfile.mkdtemp(prefix="bench-ltm-flink-"))
    (work / "input").mkdir()
    batches = [remember[b : b + args.flink_batch] for b in range(0, items, args.flink_batch)]
    savepoint, seconds = None, []
    try:
        for phase, (parallelism, records) in enumerate(((2, batches), (1, [recall]))):
            began = time.perf_counter()
            savepoint = flink_phase(work, phase, parallelism, records, savepoint)
            seconds.append(time.perf_counter() - began)
            print(f"  parallelism {parallelism}: {seconds[-1]:.0f} s", flush=True)
        from flink_agents.runtime.flink import read_json_files

        answers = {a["id"]: a for a in read_json_files(work / "answers")}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    missing = unexpected = search_missed = ops_wrong = 0
    for key, own in per_key.items():
        answer = answers[f"recall-{key}"]
        recent = answer["recent"] or []
        missing += len(set(own) - set(recent))
        unexpected += sum(1 for text in recent if text not in own)
        search_missed += (answer["searched"] or {}).get(own[0]) != own[0]
        ops_wrong += answer["ops"] != len(own) + 1  # short-term memory: the operations
    return {
        "items": items,
        "keys": len(per_key),
        "answers": len(answers),
        "missing": missing,
        "unexpected": unexpected,
        "search_missed": search_missed,
        "ops_wrong": ops_wrong,
        "add_seconds": seconds[0],
        "recall_seconds": seconds[1],
    }


def flink_phase(
    work: Path,
    phase: int,
    parallelism: int,
    batches: list[list[dict[str, Any]]],
    savepoint: str | None,
) -> str | None:
    """One job of ``tests.memory.long_term.rescale_job`` in a child process."""
    last = phase == 1
    spec = {
        "mode": "process",
        "parallelism": parallelism,
        "savepoint": savepoint,
        "savepoint_dir": (work / "savepoints").as_uri(),
        "stop": "cancel" if last else "savepoint",
        "input_dir": str(work / "input"),
        "output_dir": str(work / "answers"),
        "data_dir": str(work / "data"),
        "batches": [
            {"file": f"phase-{phase}-batch-{n}.jsonl", "records": batch}
            for n, batch in enumerate(batches)
        ],
    }
    path = work / f"phase-{phase}.json"
    path.write_text(json.dumps(spec))
    done = subprocess.run(
        [sys.executable, "-m", "tests.memory.long_term.rescale_job", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not results:
        raise RuntimeError(
            f"Flink phase {phase} failed (exit {done.returncode}):\n{done.stderr[-5000:]}"
        )
    return json.loads(results[-1].removeprefix("RESULT "))["savepoint"]


# --- report -------------------------------------------------------------------------------


@dataclass
class Results:
    included: float = 0.0
    """add, embedding included (the sample), items/s"""
    rows: list[SliceRow] = field(default_factory=list)
    direct: float = 0.0
    found: dict[str, Timed] = field(default_factory=dict)
    disk: float = 0.0
    wal: float = 0.0
    """of ``disk``, the engine's write-ahead log"""
    rss: float = 0.0
    rss_anon: float = 0.0
    runs: list[CompactionRun] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def bulk(self) -> float:
        """add, embedding excluded, over every slice, items/s"""
        return sum(r.items for r in self.rows) / sum(r.seconds for r in self.rows)


def header(args: argparse.Namespace) -> None:
    for line in machine():
        print(line)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    print(f"commit {commit}, flink_agents sources {source_fingerprint()}")
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    print(
        f"items={args.items:,} keys={args.keys:,} sample={args.sample:,} slice={args.slice:,} "
        f"max_storing={args.max_storing} queries={args.queries} noise={args.noise}",
        flush=True,
    )


def now() -> str:
    return f"{datetime.datetime.now(datetime.UTC):%H:%M:%S} UTC, load {load_average()}"


def print_fill(results: Results) -> None:
    print("\nadd, one item per action through MemorySet.add, as the store grows")
    print(
        table(
            ["items stored", "added", "items/s", "CPU us/item", "RSS MiB", "anon MiB",
             "disk MiB", "search p95 excl / incl ms", "load"],
            [
                [r.upto, r.items, r.rate, r.cpu_us, r.rss, r.rss_anon, r.disk,
                 f"{r.search_excluded_p95:.2f} / {r.search_included_p95:.2f}", r.load]
                for r in results.rows
            ],
        )
    )  # fmt: skip
    print(f"add, embedding included (the sample, real model): {results.included:,.0f} items/s")
    print(f"add, embedding excluded (every slice):           {results.bulk:,.0f} items/s")
    print(f"store alone, upsert of one point per call at full size: {results.direct:,.0f} items/s")


def print_search(results: Results, items: int) -> None:
    print(f"\nsearch at {items:,} items, one key's set, limit 10, defaults (exact, tracking on)")
    print(
        table(
            ["", "p50 ms", "p95 ms", "mean ms", "CPU ms per call", "n"],
            [
                [label, pct(t.ms, 50), pct(t.ms, 95), statistics.fmean(t.ms), t.cpu_ms, len(t.ms)]
                for label, t in results.found.items()
            ],
        )
    )


def print_compaction(results: Results, args: argparse.Namespace) -> None:
    for run in results.runs:
        print(
            f"\ncompaction, {run.label}: target {run.rate:,.0f} adds/s, achieved "
            f"{run.achieved:,.0f}/s, capacity {args.capacity} (trim), "
            f"{min(args.compaction_keys, args.keys):,} keys; over capacity gained "
            f"{run.growth():,.1f}/s in the second half; mean wait for a pass "
            f"{run.mean_wait():.2f} s; drain after the adds stopped {run.drain_seconds:.1f} s"
        )
        print(
            table(
                ["seconds", "added", "over capacity", "passes"],
                [[f"{t:.0f}", a, o, p] for t, a, o, p in run.samples],
            )
        )
        busy = sorted(run.cpu.items(), key=lambda item: -item[1])
        print("CPU s by thread while paced: " + ", ".join(f"{n} {c:.1f}" for n, c in busy if c))
        compacting = run.cpu.get("flink-agents-compaction", 0.0)
        adding = sum(run.cpu.values()) - compacting
        print(
            f"CPU per pass (compaction thread) {compacting * 1000 / max(1, run.passes):.2f} ms "
            f"({run.passes:,} passes); CPU per add (every other thread) "
            f"{adding * 1000 / max(1, run.added):.2f} ms ({run.added:,} adds)"
        )


def print_rescale(results: Results) -> None:
    print("\nrescale: fresh processes on the store, each its keys' every item")
    print(
        table(
            ["process", "hosts", "keys", "items", "missing", "unexpected", "first answer s",
             "s", "p50 ms", "p95 ms", "peak RSS MiB", "anon MiB"],
            [
                [n, r["hosting"], r["keys"], r["items"], r["missing"], r["unexpected"],
                 r["first_answer_s"] or 0.0, r["seconds"], r["p50_ms"], r["p95_ms"],
                 r["rss_mib"], r["rss_anon_mib"]]
                for n, r in enumerate(results.checks)
            ],
        )
    )  # fmt: skip


def record(results: Results, args: argparse.Namespace) -> None:
    size = f"{args.items:,} items over {args.keys:,} keys, embedded store, offline model"
    record_figure("ltm_scale.add_included_items_s", results.included, f"{size}; the sample")
    record_figure("ltm_scale.add_excluded_items_s", results.bulk, size)
    record_figure("ltm_scale.add_excluded_last_slice_items_s", results.rows[-1].rate, size)
    record_figure("ltm_scale.add_excluded_first_slice_cpu_us", results.rows[0].cpu_us, size)
    record_figure("ltm_scale.add_excluded_last_slice_cpu_us", results.rows[-1].cpu_us, size)
    record_figure("ltm_scale.store_upsert_items_s", results.direct, size)
    for label, figure in (
        ("search, embedding included (defaults)", "search_included_p95_ms"),
        ("search, embedding excluded", "search_excluded_p95_ms"),
        ("search, embedding included, model on 1 thread", "search_included_1_thread_p95_ms"),
    ):
        record_figure(f"ltm_scale.{figure}", pct(results.found[label].ms, 95), size)
    record_figure("ltm_scale.disk_mib", results.disk, size)
    record_figure("ltm_scale.disk_wal_mib", results.wal, size)
    record_figure("ltm_scale.rss_mib", results.rss, size)
    record_figure("ltm_scale.rss_anon_mib", results.rss_anon, size)
    record_figure("ltm_scale.peak_rss_mib", peak_rss_mib(), size)
    detail = f"{size}; capacity {args.capacity}, {min(args.compaction_keys, args.keys):,} keys"
    for run in results.runs:
        worst = max(s[2] for s in run.samples)
        record_figure(f"ltm_scale.compaction_over_capacity_max.{run.label}", worst, detail)
        record_figure(f"ltm_scale.compaction_drain_s.{run.label}", run.drain_seconds, detail)
        record_figure(f"ltm_scale.compaction_growth_items_s.{run.label}", run.growth(), detail)
        record_figure(f"ltm_scale.compaction_achieved_adds_s.{run.label}", run.achieved, detail)
    missing = sum(r["missing"] + r["unexpected"] for r in results.checks)
    record_figure("ltm_scale.rescale_items_missing", missing, size)


# --- main ---------------------------------------------------------------------------------


def build(args: argparse.Namespace, directory: Path) -> Setup:
    texts = sentences(random.Random(7), args.sample + args.queries)
    sample, queries = texts[: args.sample], texts[args.sample :]
    model = LocalEmbeddingModel()
    began = time.perf_counter()
    query_vectors = np.asarray(model.embed(queries), np.float32)
    print(f"model load + {len(queries)} queries embedded: {time.perf_counter() - began:.1f} s")
    store = open_vector_store(directory)  # as runners open <data-dir>/vector-store
    fills = TableEmbedding(model, np.empty((0, model.dimension), np.float32), {})
    asks = TableEmbedding(model, query_vectors, {q: n for n, q in enumerate(queries)})
    batchers = [EmbeddingBatcher(model), EmbeddingBatcher(fills)]
    one_thread = LocalEmbeddingModel(threads=1)
    return Setup(
        args,
        directory,
        store,
        model,
        ItemPlan(args.items, args.keys, tuple(sample)),
        queries,
        query_vectors,
        VectorLongTermMemory(store, model, batcher=batchers[0]),
        fills,
        VectorLongTermMemory(store, fills, batcher=batchers[1]),
        VectorLongTermMemory(store, asks),
        one_thread,
        VectorLongTermMemory(store, one_thread),
        batchers,
    )


def close(setup: Setup) -> None:
    """End the first job: store what was added, stop the pools, release the store."""
    for memory in (setup.real, setup.tabled, setup.queried, setup.single):
        memory.close()
    for batcher in setup.batchers:
        batcher.close()
    setup.store.close()


def compaction_rates(args: argparse.Namespace, results: Results) -> dict[str, float]:
    """``--compaction-rates`` by label: ``included``/``excluded`` (measured), or numbers."""
    named = {"included": results.included, "excluded": results.bulk}
    rates = {}
    for name in filter(None, args.compaction_rates.split(",")):
        rates[name if name in named else f"{float(name):.0f}_s"] = named.get(name) or float(name)
    return rates


def measure(args: argparse.Namespace, directory: Path) -> Results:
    results = Results()
    setup = build(args, directory)
    print(f"\n1. fill ({now()})", flush=True)
    results.included, results.rows = fill(setup)
    results.direct = direct_upserts(setup)
    print(f"\n2. search ({now()})", flush=True)
    results.found = search_at_size(setup)
    results.disk = disk_mib(directory)
    results.wal = disk_mib(directory / MEMORY_COLLECTION / "shard" / "wal")  # edge's layout
    results.rss, results.rss_anon = rss_mib(), rss_mib("RssAnon")
    stored = setup.store.count(MEMORY_COLLECTION, Filter(must=[FieldMatch("set", SET_NAME)]))
    print(f"  points in set {SET_NAME!r}: {stored:,}; disk {results.disk:,.0f} MiB", flush=True)
    print(f"\n3. compaction ({now()})", flush=True)
    try:
        results.runs = compaction(setup, compaction_rates(args, results))
    finally:
        close(setup)
    print(f"\n4. rescale ({now()})", flush=True)
    results.checks = rescale(setup, str(directory))
    return results


def run(args: argparse.Namespace) -> None:
    header(args)
    work = Path(args.dir or tempfile.mkdtemp(prefix="bench-ltm-scale-"))
    directory = work / "vector-store"  # <data-dir>/vector-store, the runners' default
    print(f"store directory {directory}", flush=True)
    began = time.perf_counter()
    try:
        results = measure(args, directory)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    print_fill(results)
    print_search(results, args.items)
    print(
        f"\ndisk at {args.items:,} items: {results.disk:,.0f} MiB, of which the write-ahead "
        f"log {results.wal:,.0f} MiB; RSS of this process at full size (store open) "
        f"{results.rss:,.0f} MiB, of which anonymous {results.rss_anon:,.0f} MiB; peak "
        f"{peak_rss_mib():,.0f} MiB"
    )
    print_compaction(results, args)
    print_rescale(results)
    record(results, args)
    assert all(r["missing"] == 0 and r["unexpected"] == 0 for r in results.checks)
    if args.flink_items:
        print(f"\n5. Flink rescale ({now()})", flush=True)
        flink = flink_rescale(args)
        print(f"Flink rescale (process mode, parallelism 2 -> savepoint -> 1): {flink}")
        record_figure(
            "ltm_scale.flink_rescale_items_missing",
            flink["missing"] + flink["unexpected"],
            f"{flink['items']:,} items, {flink['keys']:,} keys, process mode, 2 -> 1",
        )
        assert not (flink["missing"] or flink["unexpected"] or flink["ops_wrong"]), flink
    print(f"\ntotal {time.perf_counter() - began:.0f} s; {now()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--sample", type=int, default=3000, help="items really embedded")
    parser.add_argument("--slice", type=int, default=100_000, help="items per curve point")
    parser.add_argument("--noise", type=float, default=0.01, help="per-dimension sigma")
    parser.add_argument("--max-storing", type=int, default=512, help="actions parked at once")
    parser.add_argument("--direct", type=int, default=10_000, help="store-only upserts")
    parser.add_argument("--queries", type=int, default=1000, help="timed searches per kind")
    parser.add_argument("--probe-queries", type=int, default=200, help="per slice; 0: none")
    parser.add_argument("--compaction-keys", type=int, default=10_000)
    parser.add_argument("--capacity", type=int, default=10)
    parser.add_argument("--compaction-rates", default="included,1000,excluded")
    parser.add_argument("--compaction-seconds", type=float, default=60.0)
    parser.add_argument("--sample-every", type=float, default=5.0)
    parser.add_argument("--rescale-processes", type=int, default=3)
    parser.add_argument("--check-keys", type=int, default=100_000, help="at most --keys")
    parser.add_argument("--flink-items", type=int, default=10_000, help="0: no Flink job")
    parser.add_argument("--flink-keys", type=int, default=1000)
    parser.add_argument("--flink-batch", type=int, default=2000)
    parser.add_argument("--dir", help="keep the store here (default: a temporary directory)")
    parser.add_argument("--check", help=argparse.SUPPRESS)  # a rescale check's spec
    args = parser.parse_args()
    if args.check:
        result = check_keys(json.loads(Path(args.check).read_text()))
        print("RESULT " + json.dumps(result), flush=True)
        return
    if not 0 < args.sample <= args.items or args.queries < args.probe_queries:
        parser.error("need 0 < --sample <= --items and --probe-queries <= --queries")
    run(args)


if __name__ == "__main__":
    main()
