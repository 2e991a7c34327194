"""Fixtures: a fresh store of every backend per test, and small deterministic vectors.

Backends: ``edge`` (qdrant-edge-py in a temporary directory), ``memory`` (qdrant-client's
local ``:memory:`` mode) and ``server`` (a real Qdrant server at ``$QDRANT_URL``, with
``$QDRANT_API_KEY`` if set; skipped where the variable is unset, as no server runs here).
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from flink_agents.integrations.vector_stores import VectorStore

DIM = 4
MODEL = "test:model-a"
SERVER_SKIP = "QDRANT_URL is not set: no Qdrant server to test against (none can run here)"


def unit(*values: float) -> list[float]:
    """``values`` padded to ``DIM`` and L2-normalised."""
    padded = [*values, *([0.0] * (DIM - len(values)))]
    norm = math.sqrt(sum(v * v for v in padded))
    return [v / norm for v in padded]


@dataclass
class Backend:
    """How to open (another store object over) one backend's data, and its traits."""

    name: str
    opener: Callable[[], VectorStore]
    inspectable_indexes: bool
    opened: list[VectorStore] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def open(self) -> VectorStore:
        store = self.opener()
        self.opened.append(store)
        return store

    def new_name(self) -> str:
        """A collection name no other test (or earlier run on a shared server) uses."""
        name = f"fa_test_{uuid.uuid4().hex[:12]}"
        self.names.append(name)
        return name

    def cleanup(self) -> None:
        if self.name == "server" and self.names:
            store = self.open()
            for name in self.names:
                store.drop_collection(name)
        for store in self.opened:
            store.close()


@pytest.fixture(params=["edge", "memory", "server"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    """A fresh store of every backend; scroll pages are made tiny so paging is exercised."""
    if request.param == "edge":
        from flink_agents.integrations.vector_stores import edge

        monkeypatch.setattr(edge, "SCROLL_PAGE", 3)
        path = tmp_path / "vectors"
        made = Backend("edge", lambda: edge.EdgeVectorStore(path), inspectable_indexes=True)
    else:
        from qdrant_client import QdrantClient

        from flink_agents.integrations.vector_stores import client

        monkeypatch.setattr(client, "SCROLL_PAGE", 3)
        if request.param == "memory":
            shared = QdrantClient(":memory:")  # every "open" is a new store over this data
            request.addfinalizer(shared.close)
            made = Backend(
                "memory",
                lambda: client.QdrantClientVectorStore(client=shared),
                inspectable_indexes=False,
            )
        else:
            url = os.environ.get("QDRANT_URL")
            if not url:
                pytest.skip(SERVER_SKIP)
            key = os.environ.get("QDRANT_API_KEY")
            made = Backend(
                "server",
                lambda: client.QdrantClientVectorStore(url, api_key=key),
                inspectable_indexes=True,
            )
    try:
        yield made
    finally:
        made.cleanup()


@pytest.fixture
def store(backend: Backend) -> VectorStore:
    """An open store of the parametrized backend."""
    return backend.open()


@pytest.fixture
def coll(backend: Backend, store: VectorStore) -> str:
    """A new collection of ``DIM`` dimensions for ``MODEL``, with an extra integer index ``n``."""
    name = backend.new_name()
    store.ensure_collection(name, DIM, MODEL, indexes={"n": "integer"})
    return name
