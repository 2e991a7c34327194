"""Batched embedding: an agent that adds one long-term memory item per record, against the
embedding model alone (issue 16, item 2).

``BatchingAgent`` has one action per record: it adds a short generated sentence, distinct per
record, to its key's ``notes`` memory set (no capacity: no compaction). Since ``add`` hands
the text to the runner's ``EmbeddingBatcher`` (shared batches of up to 128 texts, 5 ms delay,
2 batches at once) and the action's run parks until its item is stored, the job's rate is
bounded by the batches the batcher can form, not by one model call per record.

Two cases, each in its own table:

- ``remote``: ``OpenAIEmbeddingModel`` pointed at the scripted OpenAI-compatible server
  (``flink_agents.testing.llm_server``, in this process) answering every request after
  ``--latency`` seconds (50 ms), vectors of ``--dim`` floats. Goal: >= 1,000 records/s.
- ``local``: the offline ``LocalEmbeddingModel`` (MiniLM int8 on onnxruntime). Goal: as
  close to the model's own batched speed as the machine allows.

The "model alone" baselines embed the same texts in this process, from a plain loop: in
batches of 128 (the batcher's largest), in batches of 128 from two threads (the batcher's
two batches at once: its ceiling), and one text per call (what an unbatched ``add`` pays),
the last over ``--single`` texts only.

Jobs: MiniCluster, parallelism 1, ``python.execution-mode: thread`` (the default of agent
jobs), a Java number sequence mapped to ``(key, n)`` over ``--keys`` keys, the agent, a
discarding sink. Options are the defaults but ``data-dir`` (a fresh temporary directory per
job) and ``long-term-memory-embedding`` (the case's model, wrapped to log every call); the
agent runs with its default action log (SQLite) and with ``action_log="none"``, and with
the ``max-in-flight`` values of ``--in-flight`` (the limit on parked runs, default 32).

Records/s are "net": the wall time of ``env.execute()`` minus that of the same agent over
``--small`` records (start-up, the model's and store's lazy opening, the end-of-input
drain), i.e. ``(records - small) / (t - t_small)``; also shown net of an empty
source-to-sink job, as in ``state_throughput.py``. Every job runs ``--repeat`` times and the
tables show medians. Each job's embedding calls are logged by the wrapper (texts per call,
duration, overlap): the batches the batcher actually formed; their texts must add up to the
records (each record embedded once).

    PYTHONPATH=$PWD .venv/bin/python -m bench.long_term_batching [--cases remote,local]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyflink.common import Types

from bench._common import (
    Timing,
    discard,
    enable_thread_mode,
    keyed_records,
    machine_summary,
    make_env,
    sequence,
    table,
    timed,
)
from flink_agents.api import (
    Agent,
    AgentsExecutionEnvironment,
    BaseEmbeddingModel,
    InputEvent,
    OutputEvent,
    ResourceType,
    action,
    resource,
)

GOAL_REMOTE = 1_000  # records/s per subtask, embeddings answered in 50 ms
BATCH = 128  # the batcher's max_batch
THREAD = {"python.execution-mode": "thread"}
URL_ENV, DIM_ENV, STATS_ENV = "BENCH_LTB_URL", "BENCH_LTB_DIM", "BENCH_LTB_STATS"

# -- the texts ---------------------------------------------------------------------------------

_SUBJECTS = (
    "My sister", "Our neighbour", "The manager", "A colleague", "My father",
    "The teacher", "Her cousin", "The doctor", "Our landlord", "My friend",
)  # fmt: skip
_VERBS = (
    "booked", "cancelled", "moved", "paid for", "forgot",
    "planned", "asked about", "changed", "confirmed", "mentioned",
)  # fmt: skip
_OBJECTS = (
    "a window seat for the trip", "the dentist appointment", "the team dinner",
    "a table at the Italian place", "the gym membership", "the flight to Lisbon",
    "the piano lessons", "the car service", "the book club meeting", "the hotel room",
)  # fmt: skip
_WHEN = (
    "in June", "next Monday", "last week", "on Friday evening", "before the holidays",
    "this morning", "after lunch", "in the spring", "at the weekend", "tomorrow",
)  # fmt: skip


def sentence(n: int) -> str:
    """A short sentence, distinct for every ``n`` (10,000 combinations, then a counter)."""
    text = (
        f"{_SUBJECTS[n % 10]} {_VERBS[n // 10 % 10]} {_OBJECTS[n // 100 % 10]} "
        f"{_WHEN[n // 1000 % 10]}."
    )
    return text if n < 10_000 else f"{text} ({n // 10_000})"


# -- the agent and its models (module level: the Python worker imports them) ------------------


class LoggedEmbedding(BaseEmbeddingModel):
    """Delegates to ``inner`` and appends one line per ``embed`` call to a file under
    ``stats_dir``: texts, start (``time.monotonic()``, the same clock in every process of
    the machine) and duration. Benchmark-only: it shows the batches the batcher formed."""

    def __init__(self, inner: BaseEmbeddingModel, stats_dir: str, kind: str) -> None:
        self.inner = inner
        self._path = Path(stats_dir) / f"{kind}-{os.getpid()}-{id(self)}.log"
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        started = time.monotonic()
        vectors = self.inner.embed(texts)
        took = time.monotonic() - started
        with self._lock, self._path.open("a", encoding="ascii") as log:
            log.write(f"{len(texts)} {started:.6f} {took:.6f}\n")
        return vectors

    def embed_one(self, text: str) -> list[float]:
        return self.inner.embed_one(text)


def remote_model(base_url: str, dimension: int | str) -> BaseEmbeddingModel:
    from flink_agents.integrations.embeddings import OpenAIEmbeddingModel

    return OpenAIEmbeddingModel("scripted", base_url=base_url, dimension=int(dimension))


def local_model() -> BaseEmbeddingModel:
    from flink_agents.integrations.embeddings import LocalEmbeddingModel

    return LocalEmbeddingModel()


class InstantEmbedding(BaseEmbeddingModel):
    """Unit basis vectors picked by a hash of the text: no embedding cost, so a job with it
    shows what the agent, the batcher's plumbing and the store alone sustain."""

    def __init__(self, dimension: int) -> None:
        self._dimension = dimension

    @property
    def model_id(self) -> str:
        return f"bench:instant-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            vector = [0.0] * self._dimension
            vector[zlib.crc32(text.encode()) % self._dimension] = 1.0
            vectors.append(vector)
        return vectors


class BatchingAgent(Agent):
    """One action per record: add its sentence to the key's ``notes`` set. The embedding
    model is ``remote_embedder``, ``local_embedder`` or ``instant_embedder`` (option
    ``long-term-memory-embedding``);
    their arguments come from this process's environment, which the MiniCluster's JVM (and
    its Python, in thread mode) inherits when it starts."""

    @action(InputEvent)
    @staticmethod
    def remember(event: InputEvent, ctx: Any) -> None:
        n = event.input[1]
        ctx.long_term_memory.create_memory_set("notes", str).add(sentence(n))
        ctx.send_event(OutputEvent(output=n))

    @resource(
        ResourceType.EMBEDDING_MODEL,
        base_url=f"${{env:{URL_ENV}}}",
        dimension=f"${{env:{DIM_ENV}}}",
        stats_dir=f"${{env:{STATS_ENV}}}",
    )
    @staticmethod
    def remote_embedder(base_url: str, dimension: str, stats_dir: str) -> BaseEmbeddingModel:
        return LoggedEmbedding(remote_model(base_url, dimension), stats_dir, "remote")

    @resource(ResourceType.EMBEDDING_MODEL, stats_dir=f"${{env:{STATS_ENV}}}")
    @staticmethod
    def local_embedder(stats_dir: str) -> BaseEmbeddingModel:
        return LoggedEmbedding(local_model(), stats_dir, "local")

    @resource(
        ResourceType.EMBEDDING_MODEL,
        dimension=f"${{env:{DIM_ENV}}}",
        stats_dir=f"${{env:{STATS_ENV}}}",
    )
    @staticmethod
    def instant_embedder(dimension: str, stats_dir: str) -> BaseEmbeddingModel:
        return LoggedEmbedding(InstantEmbedding(int(dimension)), stats_dir, "instant")


# -- what the batcher formed -----------------------------------------------------------------


@dataclass
class Batches:
    """The embedding calls of one job, from the wrapper's log."""

    sizes: list[int]
    starts: list[float]
    durations: list[float]

    @classmethod
    def read(cls, stats_dir: Path) -> Batches:
        rows = []
        for path in stats_dir.glob("*.log"):
            for line in path.read_text(encoding="ascii").splitlines():
                size, start, took = line.split()
                rows.append((float(start), int(size), float(took)))
        rows.sort()
        return cls([r[1] for r in rows], [r[0] for r in rows], [r[2] for r in rows])

    @property
    def texts(self) -> int:
        return sum(self.sizes)

    def ends(self) -> list[float]:
        return [s + d for s, d in zip(self.starts, self.durations, strict=True)]

    def busy_share(self) -> float:
        """The share of the span from the first call's start to the last call's end during
        which at least one call was running."""
        if not self.sizes:
            return 0.0
        spans = sorted(zip(self.starts, self.ends(), strict=True))
        busy, (cur_start, cur_end) = 0.0, spans[0]
        for start, end in spans[1:]:
            if start > cur_end:
                busy += cur_end - cur_start
                cur_start, cur_end = start, end
            else:
                cur_end = max(cur_end, end)
        busy += cur_end - cur_start
        return busy / max(1e-9, max(e for _, e in spans) - spans[0][0])

    def max_overlap(self) -> int:
        events = sorted([(s, 1) for s in self.starts] + [(end, -1) for end in self.ends()])
        now = most = 0
        for _, step in events:
            now += step
            most = max(most, now)
        return most

    def summary(self) -> str:
        if not self.sizes:
            return "no embedding calls logged"
        sizes = self.sizes
        full = sum(s >= BATCH for s in sizes)
        return (
            f"{len(sizes)} calls, {self.texts} texts, texts/call mean {statistics.mean(sizes):.1f}"
            f" median {statistics.median(sizes):.0f} max {max(sizes)}, {full} full ({BATCH});"
            f" call {statistics.median(self.durations) * 1000:.0f} ms median;"
            f" model busy {self.busy_share():.0%} of the span; calls at once <= "
            f"{self.max_overlap()}"
        )


@dataclass
class Run:
    timing: Timing
    batches: Batches


# -- the jobs ----------------------------------------------------------------------------------


class Jobs:
    """Builds and times the jobs of one case in fresh data directories."""

    def __init__(self, case: str, keys: int, work: Path, stats: Path) -> None:
        self.case, self.keys, self.work, self.stats = case, keys, work, stats
        self._serial = 0

    def options(self, model: str | None = None, **extra: Any) -> dict[str, Any]:
        """Default options but a fresh ``data-dir`` and the embedding resource (``model``:
        ``remote``, ``local`` or ``instant``; None: the case's); ``extra`` overrides."""
        self._serial += 1
        data_dir = self.work / f"{self.case}-{self._serial}"
        data_dir.mkdir()
        return {
            "data_dir": str(data_dir),
            "long_term_memory_embedding": f"{model or self.case}_embedder",
            **extra,
        }

    def stream(self, env, records: int, options: dict[str, Any]):
        environment = AgentsExecutionEnvironment.get_execution_environment(env, **options)
        return (
            environment.from_datastream(
                keyed_records(env, records, self.keys),
                key_selector=_record_key,
                key_type=Types.STRING(),
            )
            .apply(BatchingAgent)
            .to_datastream()
        )

    def agent(self, records: int, **extra: Any) -> Run:
        for path in self.stats.glob("*.log"):
            path.unlink()
        env = make_env(config=THREAD)
        discard(self.stream(env, records, self.options(**extra)))
        timing = timed(env, f"long-term batching {self.case}")
        batches = Batches.read(self.stats)
        if batches.texts != records:
            print(f"  WARNING: {batches.texts} texts embedded for {records} records", flush=True)
        return Run(timing, batches)

    def verify(self, records: int, keys: int, model: BaseEmbeddingModel) -> None:
        """A small job, collected (never timed): one output per record, and every key's set
        holds exactly its records' sentences once the job has ended."""
        from flink_agents.integrations.vector_stores import open_vector_store
        from flink_agents.memory.long_term import VectorLongTermMemory

        saved, self.keys = self.keys, keys
        try:
            options = self.options()
            env = make_env(config=THREAD)
            with self.stream(env, records, options).execute_and_collect() as results:
                outputs = sorted(results)
        finally:
            self.keys = saved
        store = open_vector_store(Path(options["data_dir"]) / "vector-store")
        try:
            memory = VectorLongTermMemory(store, model)
            wrong = 0
            for k in range(keys):
                items = memory.for_key(f"k{k}").get_memory_set("notes").get()
                expected = sorted(sentence(n) for n in range(k, records, keys))
                wrong += sorted(item.item for item in items) != expected
            memory.close()
        finally:
            store.close()
        ok = outputs == list(range(records)) and wrong == 0
        print(
            f"  verify {self.case}: {len(outputs)} outputs for {records} records, "
            f"{keys - wrong}/{keys} keys hold exactly their sentences: {'ok' if ok else 'WRONG'}",
            flush=True,
        )
        if not ok:
            raise SystemExit(f"the {self.case} job stored wrong results")


def _record_key(record: tuple[str, int]) -> str:
    return record[0]


def empty_job(records: int) -> Run:
    env = make_env(config=THREAD)
    discard(sequence(env, records))
    return Run(timed(env, "empty"), Batches([], [], []))


# -- the model alone ---------------------------------------------------------------------------


def model_rate(model: BaseEmbeddingModel, texts: list[str], batch: int, threads: int = 1) -> float:
    """Texts/s of ``model.embed`` over ``texts`` in calls of ``batch``, from ``threads``."""
    chunks = [texts[i : i + batch] for i in range(0, len(texts), batch)]
    started = time.perf_counter()
    if threads == 1:
        for chunk in chunks:
            model.embed(chunk)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(model.embed, chunks))
    return len(texts) / (time.perf_counter() - started)


# -- the run -----------------------------------------------------------------------------------

EMPTY, SMALL, DEFAULT, NO_LOG, INSTANT, INSTANT_WIDE = (
    "empty (source -> sink)",
    "agent, --small records (start-up)",
    "agent, default options",
    "agent, action_log=none",
    "agent, instant model (no embedding cost)",
    "agent, instant model, max_in_flight=512",
)
MODEL_BATCHED, MODEL_TWO, MODEL_SINGLE = (
    f"model alone, batches of {BATCH}",
    f"model alone, batches of {BATCH}, 2 threads",
    "model alone, one text per call",
)


def in_flight_name(limit: int) -> str:
    return f"agent, max_in_flight={limit}"


def run_case(
    case: str, args: argparse.Namespace, work: Path, stats: Path, model: BaseEmbeddingModel
) -> None:
    records = args.records_remote if case == "remote" else args.records_local
    jobs = Jobs(case, args.keys, work, stats)
    texts = [sentence(n) for n in range(records)]
    print(f"\n== {case}: {records:,} records over {args.keys:,} keys ==", flush=True)
    jobs.verify(400, 100, model)
    # Warm-up, not reported: the JVM, the worker's imports, the model's first call.
    jobs.agent(args.small)
    model_rate(model, texts[:BATCH], BATCH)

    timed_jobs: list[tuple[str, Callable[[], Run]]] = [
        (EMPTY, lambda: empty_job(records)),
        (SMALL, lambda: jobs.agent(args.small)),
        (DEFAULT, lambda: jobs.agent(records)),
        (NO_LOG, lambda: jobs.agent(records, action_log="none")),
    ]
    for limit in args.in_flight:
        timed_jobs.append(
            (in_flight_name(limit), lambda limit=limit: jobs.agent(records, max_in_flight=limit))
        )
    if case == "remote" and args.instant:
        timed_jobs += [
            (INSTANT, lambda: jobs.agent(records, model="instant")),
            (INSTANT_WIDE, lambda: jobs.agent(records, model="instant", max_in_flight=512)),
        ]
    single = texts[: args.single]
    baselines: list[tuple[str, Callable[[], float]]] = [
        (MODEL_BATCHED, lambda: model_rate(model, texts, BATCH)),
        (MODEL_TWO, lambda: model_rate(model, texts, BATCH, threads=2)),
        (MODEL_SINGLE, lambda: model_rate(model, single, 1)),
    ]
    runs: dict[str, list[Run]] = {}
    rates: dict[str, list[float]] = {}
    for round_ in range(args.repeat):
        for name, rate in baselines:
            rates.setdefault(name, []).append(rate())
            print(f"  round {round_ + 1}: {name}: {rates[name][-1]:,.0f} texts/s", flush=True)
        order = timed_jobs if round_ % 2 == 0 else timed_jobs[:2] + timed_jobs[:1:-1]
        for name, job in order:
            run = job()
            runs.setdefault(name, []).append(run)
            print(
                f"  round {round_ + 1}: {name}: {run.timing.wall:.2f} s wall"
                + (f"; {run.batches.summary()}" if run.batches.sizes else ""),
                flush=True,
            )
    report(case, records, args.small, runs, rates)


def _median_run(runs: list[Run]) -> Run:
    return sorted(runs, key=lambda r: r.timing.wall)[(len(runs) - 1) // 2]


def report(
    case: str,
    records: int,
    small: int,
    runs: dict[str, list[Run]],
    rates: dict[str, list[float]],
) -> None:
    median = {name: _median_run(r) for name, r in runs.items()}
    model = {name: statistics.median(r) for name, r in rates.items()}
    empty, start = median[EMPTY].timing.wall, median[SMALL].timing.wall
    batched = model[MODEL_BATCHED]
    rows = []
    for name, run in median.items():
        if name in (EMPTY, SMALL):
            rows.append((name, run.timing.wall, "", "", "", "", ""))
            continue
        wall = run.timing.wall
        net = (records - small) / (wall - start)
        sizes = run.batches.sizes
        rows.append(
            (
                name,
                wall,
                records / (wall - empty),
                net,
                f"{net / batched:.2f}",
                f"{statistics.mean(sizes):.1f}" if sizes else "",
                max(sizes) if sizes else "",
            )
        )
    for name, rate in model.items():
        rows.append((name, "", "", rate, f"{rate / batched:.2f}", "", ""))
    print(f"\n-- {case}: medians of {len(runs[EMPTY])} runs --")
    headers = [
        "job",
        "wall s",
        "rec/s net of empty",
        "rec/s net of start-up",
        "/ model batched",
        "texts/call",
        "max",
    ]
    print(table(headers, rows))
    print("   (model alone: texts/s; ratio = rate / model alone in batches of 128)")
    for name, run in median.items():
        if run.batches.sizes:
            print(f"   {name}: {run.batches.summary()}")
    default = (records - small) / (median[DEFAULT].timing.wall - start)
    no_log = (records - small) / (median[NO_LOG].timing.wall - start)
    print(f"ratio job (default options) / model alone, batches of {BATCH}: {default / batched:.2f}")
    print(
        f"ratio job / model alone, one text per call:         {default / model[MODEL_SINGLE]:.1f}"
    )
    print(f"ratio job action_log=none / default options:        {no_log / default:.2f}")
    if case == "remote":
        met = default >= GOAL_REMOTE
        print(
            ("MET" if met else "NOT MET")
            + f": >= {GOAL_REMOTE:,} records/s with default options ({default:,.0f})",
            flush=True,
        )


def start_server(latency: float, dim: int) -> tuple[subprocess.Popen[str], str]:
    """The scripted server in a process of its own (as a remote endpoint would be: its
    JSON encoding does not share this process's GIL with the model-alone loops); returns
    it and its base URL."""
    code = (
        "import sys, time\n"
        "from flink_agents.testing.llm_server import ScriptedLLMServer\n"
        f"server = ScriptedLLMServer(latency_s={latency!r}, embedding_dim={dim!r}).start()\n"
        "print(server.base_url, flush=True)\n"
        "while True: time.sleep(3600)\n"
    )
    server = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    return server, server.stdout.readline().strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="remote,local", help="remote, local or both")
    parser.add_argument("--records-remote", type=int, default=5_000)
    parser.add_argument("--records-local", type=int, default=2_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--small", type=int, default=200, help="records of the start-up job")
    parser.add_argument("--single", type=int, default=100, help="texts embedded one per call")
    parser.add_argument("--latency", type=float, default=0.05, help="server seconds per call")
    parser.add_argument("--dim", type=int, default=384, help="the server's vector length")
    parser.add_argument(
        "--in-flight",
        default="128,512",
        help="max-in-flight values to try besides the default (comma-separated; '' for none)",
    )
    parser.add_argument(
        "--no-instant",
        dest="instant",
        action="store_false",
        help="skip the jobs with an instant model (the ceiling without embedding cost)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per job; medians count")
    args = parser.parse_args(argv)
    args.in_flight = [int(v) for v in args.in_flight.split(",") if v]
    cases = [c for c in args.cases.split(",") if c]

    work = Path(tempfile.mkdtemp(prefix="bench-ltb-"))
    stats = work / "stats"
    stats.mkdir()
    server, base_url = start_server(args.latency, args.dim)
    # Read by the agent's resources in the MiniCluster's Python: set before its JVM starts.
    os.environ.update({URL_ENV: base_url, DIM_ENV: str(args.dim), STATS_ENV: str(stats)})
    enable_thread_mode()
    print("== batched embedding: an agent adding one long-term item per record ==")
    print(machine_summary())
    print(
        f"cases={cases} keys={args.keys:,} parallelism=1 mode=thread repeat={args.repeat} "
        f"small={args.small} server latency={args.latency * 1000:.0f} ms dim={args.dim} "
        f"max-in-flight tried={args.in_flight or 'none'} (default 32)",
        flush=True,
    )
    try:
        for case in cases:
            model = remote_model(base_url, args.dim) if case == "remote" else local_model()
            run_case(case, args, work, stats, model)
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    # Run from the imported module, so that the plan names the agent
    # ``bench.long_term_batching:...`` (which the Python worker can import), not ``__main__``.
    from bench.long_term_batching import main as imported_main

    sys.exit(imported_main())
