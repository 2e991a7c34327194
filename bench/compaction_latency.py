"""Benchmark: does compaction slow actions down? ``MemorySet.add`` latency with and without
compaction running in the background (issue 6: "compaction never blocks an action").

One fresh embedded store (qdrant-edge-py) and the real offline MiniLM model. For each
configuration, ``--adds`` single-item ``add`` calls (embedding included, as an action pays
it) are timed one by one on one key's set:

- **no compaction**: capacity None;
- **trim**: capacity ``--capacity``: from then on every add schedules a trim;
- **summarize**: the same capacity with ``summarize``; the chat model is the scripted
  OpenAI-compatible test stand-in (``flink_agents.testing.llm_server``) over real HTTP,
  answering after ``--llm-latency`` seconds, so a summary pass is in flight most of the time.

Then it waits for compaction to settle and prints the final count (it must be at or under
the capacity) and how many passes ran. Printed figures only; nothing asserts on time.

    PYTHONPATH=$PWD .venv/bin/python -m bench.compaction_latency [--adds 400] [--capacity 40]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from bench.long_term_memory import load_average, machine, row, sentences
from bench.vector_store import latencies
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.integrations.embeddings import LocalEmbeddingModel
from flink_agents.integrations.vector_stores.edge import EdgeVectorStore
from flink_agents.memory.long_term import VectorLongTermMemory
from flink_agents.testing.llm_server import Rule, ScriptedLLMServer


def measure(
    label: str,
    directory: Path,
    model: LocalEmbeddingModel,
    texts: list[str],
    capacity: int | None,
    strategy: str,
    chat: OpenAIChatModel | None,
) -> list[str]:
    with EdgeVectorStore(directory) as store:
        memory = VectorLongTermMemory(store, model, chat_model=chat, track_access=False)
        notes = memory.for_key("user-1").create_memory_set(
            "notes", str, capacity=capacity, capacity_manage_strategy=strategy
        )
        ms = latencies(len(texts), lambda n: notes.add(texts[n]))
        began = time.perf_counter()
        settled = memory.wait_for_compaction(120)
        waited = time.perf_counter() - began
        count = notes.size()
        errors = len(memory.compaction_errors)
        memory.close()
    return [
        row(f"add, {label}", ms),
        f"  then settled={settled} in {waited:.2f} s; final count {count} "
        f"(capacity {capacity}); compaction errors {errors}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adds", type=int, default=400)
    parser.add_argument("--capacity", type=int, default=40)
    parser.add_argument("--llm-latency", type=float, default=0.2, help="seconds per summary")
    args = parser.parse_args()
    for line in machine():
        print(line)
    print(f"load average at start: {load_average()}")
    print(f"adds={args.adds} capacity={args.capacity} llm_latency={args.llm_latency}s")
    model = LocalEmbeddingModel()
    model.embed(["warm up"])
    texts = sentences(random.Random(11), args.adds)
    server = ScriptedLLMServer(
        [Rule(system_contains="condense", reply_text="Summary of earlier notes.")],
        latency_s=args.llm_latency,
    )
    with server, tempfile.TemporaryDirectory(prefix="bench-compaction-") as tmp:
        chat = OpenAIChatModel("stand-in", base_url=server.base_url, api_key="x")
        cases = [
            ("no compaction (capacity None)", None, "trim", None),
            (f"trim, capacity {args.capacity}", args.capacity, "trim", None),
            (f"summarize, capacity {args.capacity}", args.capacity, "summarize", chat),
        ]
        for n, (label, capacity, strategy, model_for) in enumerate(cases):
            lines = measure(label, Path(tmp) / str(n), model, texts, capacity, strategy, model_for)
            for line in lines:
                print(line, flush=True)
        print(f"summary calls answered by the stand-in: {len(server.calls)}")
    print(f"load average at end: {load_average()}")


if __name__ == "__main__":
    main()
