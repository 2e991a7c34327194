"""Benchmark: the offline model's query latency and batch throughput, per thread setting.

For each configuration of ``LocalEmbeddingModel`` (``--configs``: constructor arguments as
``name=value`` joined by ``,``, configurations separated by ``;``; ``default`` for none),
in rounds that alternate the configurations (A B A B ...), each round:

- **queries**: ``embed_one`` of ``--queries`` distinct short sentences (the query cache
  cleared first, so every call runs the model): p50 and p95 of the call, and the process's
  CPU per call (every thread: onnxruntime's pool included);
- **batches**: ``embed`` of ``--batches`` batches of 32 distinct sentences: texts per second
  and CPU per text.

Medians over the rounds are printed last. Every model is loaded and warmed before the first
round. With ``--rss``, a fresh process per configuration reports its RSS after loading
(one ``embed``), then after one ``embed_one`` as well: what a query's session adds.

    PYTHONPATH=$PWD .venv/bin/python -m bench.query_embedding [--rounds 3] \\
        [--configs 'threads=None;threads=1'] [--rss]
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import statistics
import subprocess
import sys
import time
from typing import Any

from bench.long_term_memory import load_average, machine, sentences
from bench.vector_store import latencies, pct
from flink_agents.integrations.embeddings import LocalEmbeddingModel

BATCH = 32


def parse_configs(spec: str) -> dict[str, dict[str, Any]]:
    """``'threads=None;threads=1'`` as {label: constructor arguments}."""
    configs: dict[str, dict[str, Any]] = {}
    for label in (part.strip() for part in spec.split(";")):
        kwargs: dict[str, Any] = {}
        if label != "default":
            for pair in label.split(","):
                name, value = pair.split("=")
                kwargs[name.strip()] = None if value.strip() == "None" else int(value)
        configs[label] = kwargs
    return configs


def one_round(model: LocalEmbeddingModel, queries: list[str], texts: list[str]) -> dict[str, float]:
    model.clear_query_cache()
    cpu = time.process_time()
    ms = latencies(len(queries), lambda i: model.embed_one(queries[i]))
    query_cpu = (time.process_time() - cpu) * 1000 / len(queries)
    cpu, began = time.process_time(), time.perf_counter()
    for start in range(0, len(texts), BATCH):
        model.embed(texts[start : start + BATCH])
    wall, batch_cpu = time.perf_counter() - began, time.process_time() - cpu
    return {
        "query p50 ms": pct(ms, 50),
        "query p95 ms": pct(ms, 95),
        "query CPU ms": query_cpu,
        "batch texts/s": len(texts) / wall,
        "batch CPU ms/text": batch_cpu * 1000 / len(texts),
    }


def rss_of(kwargs: dict[str, Any]) -> dict[str, float]:
    """RSS of a fresh process with a model of ``kwargs``: after ``embed``, then after
    ``embed_one`` too (MiB)."""
    code = (
        "import json, sys\n"
        "from bench.long_term_scale import rss_mib\n"
        "from flink_agents.integrations.embeddings import LocalEmbeddingModel\n"
        "model = LocalEmbeddingModel(**json.loads(sys.argv[1]))\n"
        "before = rss_mib()\n"
        "model.embed(['a first text to load the model', 'and a second one'])\n"
        "batch = rss_mib()\n"
        "model.embed_one('a query')\n"
        "print(json.dumps({'start': before, 'after embed': batch, 'after embed_one': rss_mib()}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(kwargs)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="threads=None;threads=1")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--rss", action="store_true")
    args = parser.parse_args()
    configs = parse_configs(args.configs)
    print(f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M:%S} UTC, load {load_average()}")
    for line in machine():
        print(f"# {line}")
    models = {label: LocalEmbeddingModel(**kwargs) for label, kwargs in configs.items()}
    for model in models.values():  # load and warm every model before timing any
        model.embed(sentences(random.Random(-1), BATCH))
        model.embed_one("warm up")
    results: dict[str, list[dict[str, float]]] = {label: [] for label in configs}
    for number in range(args.rounds):
        rng = random.Random(number)
        queries = sentences(rng, args.queries)
        texts = sentences(rng, args.batches * BATCH)
        for label, model in models.items():  # the same texts for every configuration
            figures = one_round(model, queries, texts)
            results[label].append(figures)
            shown = ", ".join(f"{name} {value:.2f}" for name, value in figures.items())
            print(f"round {number + 1} {label}: {shown} (load {load_average()})", flush=True)
    print(f"\nmedians over {args.rounds} rounds:")
    for label, rounds in results.items():
        shown = ", ".join(
            f"{name} {statistics.median(r[name] for r in rounds):.2f}" for name in rounds[0]
        )
        print(f"  {label}: {shown}")
    if args.rss:
        print("\nRSS of a fresh process (MiB):")
        for label, kwargs in configs.items():
            print(f"  {label}: {rss_of(kwargs)}")
    print(f"# ended {datetime.datetime.now(datetime.UTC):%H:%M:%S} UTC, load {load_average()}")


if __name__ == "__main__":
    main()
