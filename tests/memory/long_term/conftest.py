"""Fixtures: every behaviour test runs on both vector-store backends with the real offline
embedding model; summaries come from the scripted LLM server over real HTTP."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.integrations.embeddings import LocalEmbeddingModel
from flink_agents.integrations.vector_stores import VectorStore
from flink_agents.memory.long_term import VectorKnowledge, VectorLongTermMemory
from flink_agents.testing.llm_server import Rule, ScriptedLLMServer

SUMMARY = "Summary: the user likes green tea and hikes on weekends."


@pytest.fixture(scope="session")
def embedding() -> LocalEmbeddingModel:
    """The offline MiniLM model, loaded once for the session (~0.4 s)."""
    model = LocalEmbeddingModel()
    model.embed_one("warm up")
    return model


@pytest.fixture(params=["edge", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    """A fresh store: qdrant-edge in a temporary directory, or qdrant-client's ``:memory:``."""
    if request.param == "edge":
        from flink_agents.integrations.vector_stores.edge import EdgeVectorStore

        opened: VectorStore = EdgeVectorStore(tmp_path / "vectors")
    else:
        from flink_agents.integrations.vector_stores.client import QdrantClientVectorStore

        opened = QdrantClientVectorStore(":memory:")
    yield opened
    opened.close()


@pytest.fixture
def summarizer(llm_server: ScriptedLLMServer) -> OpenAIChatModel:
    """A real OpenAI client on the scripted server, without its own retries (compaction's
    retries are under test)."""
    llm_server.add_rule(Rule(system_contains="condense", reply_text=SUMMARY))
    return OpenAIChatModel("stand-in", base_url=llm_server.base_url, api_key="x", max_retries=0)


MemoryFactory = Callable[..., VectorLongTermMemory]


@pytest.fixture
def make_memory(store: VectorStore, embedding: LocalEmbeddingModel) -> Iterator[MemoryFactory]:
    """Build long-term memories on the test's store (fast retries); all closed at the end."""
    made: list[VectorLongTermMemory] = []

    def factory(**kwargs: object) -> VectorLongTermMemory:
        kwargs.setdefault("retry_initial_wait", 0.01)
        kwargs.setdefault("retry_max_wait", 0.05)
        memory = VectorLongTermMemory(store, embedding, **kwargs)
        made.append(memory)
        return memory

    yield factory
    for memory in made:
        memory.close()


@pytest.fixture
def memory(make_memory: MemoryFactory) -> VectorLongTermMemory:
    return make_memory()


@pytest.fixture
def knowledge(store: VectorStore, embedding: LocalEmbeddingModel) -> VectorKnowledge:
    return VectorKnowledge(store, embedding)
