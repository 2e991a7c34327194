"""Long-term memory keeps nothing per key once a key's writes, reads and compactions are
done (issue 45, goal 4; the runtime's tables: ``tests/runtime/test_bounds.py``).
``docs/architecture.md``, "What stays in memory per key", lists every structure, its bound
and the test that holds it."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import pytest

from flink_agents.api import (
    Agent,
    BaseEmbeddingModel,
    InputEvent,
    OutputEvent,
    ResourceType,
    action,
    resource,
)
from flink_agents.memory.long_term import _core
from flink_agents.memory.long_term._compaction import ERRORS_KEPT, Compactor
from flink_agents.runtime import AgentOptions, LocalRunner


class HashedEmbedding(BaseEmbeddingModel):
    """Four numbers from a text's SHA-1: an embedding that costs nothing (the offline model
    costs milliseconds per text, and what is under test is what stays, not the vectors)."""

    @property
    def model_id(self) -> str:
        return "hashed-4"

    @property
    def dimension(self) -> int:
        return 4

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_one(text) for text in texts]

    def embed_one(self, text: str) -> list[float]:
        return [0.01 + byte / 255 for byte in hashlib.sha1(text.encode()).digest()[:4]]


class Notes(Agent):
    """Three notes into a long-term memory set of capacity two (so every key's set is
    compacted); one record in ten reads its notes back (an access record)."""

    @resource(ResourceType.EMBEDDING_MODEL)
    @staticmethod
    def embedder() -> BaseEmbeddingModel:
        return HashedEmbedding()

    @action(InputEvent)
    @staticmethod
    def note(event: InputEvent, ctx) -> None:
        notes = ctx.long_term_memory.create_memory_set("notes", str, capacity=2)
        notes.add(["a note", "another note", f"note {event.input}"])
        if event.input % 10 == 0:
            notes.get()
        ctx.send_event(OutputEvent(output=event.input))


def test_long_term_memory_keeps_nothing_per_key_once_its_writes_have_landed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Writes in flight, gathered reads, compactions and their errors are per key only while
    they last; the settings of sets opened are remembered up to a cap (made 100 here)."""
    monkeypatch.setattr(_core, "_KNOWN_SETS", 100)
    options = AgentOptions(
        long_term_memory_store=str(tmp_path / "vectors"), long_term_memory_embedding="embedder"
    )
    runner = LocalRunner(Notes, options=options)
    try:
        for n in range(1_000):
            runner.feed(f"k{n}", n)
        runner.finish()
        memory = runner.engine.long_term._memory
        assert memory.wait_for_writes(30) and memory.wait_for_compaction(30)
        compactor = memory.compactor
        assert {
            "writes in flight": len(memory.core.pending._by_scope),
            "gathered reads": len(memory.access._pending),
            "sets compacting": len(compactor._running) + len(compactor._again),
            "compaction errors": len(compactor.errors),
        } == {
            "writes in flight": 0,
            "gathered reads": 0,
            "sets compacting": 0,
            "compaction errors": 0,
        }
        assert 0 < len(memory.core._known) <= 100
        assert runner.engine.metrics.snapshot()["numOfLongTermMemoryCompactions"] >= 1_000
    finally:
        runner.close()


class _StoreDown:
    """What ``Compactor`` reads of a ``MemoryCore`` whose store is down."""

    def settings(self, key: str, name: str) -> None:
        raise ConnectionError(f"the vector store is down ({key})")


def test_compaction_keeps_its_latest_errors_not_one_per_failed_set():
    compactor = Compactor(_StoreDown(), attempts=1, initial_wait=0, max_wait=0)
    try:
        for n in range(1_000):
            compactor.schedule(f"k{n}", "notes")
        assert compactor.wait(30)
        assert len(compactor.errors) == ERRORS_KEPT
        assert str(compactor.errors[-1]) == "the vector store is down (k999)"
    finally:
        compactor.close()
