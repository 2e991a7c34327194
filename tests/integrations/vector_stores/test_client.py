"""qdrant-client backend specifics: foreign collections, local mode, and a real server."""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Iterator

import pytest
from qdrant_client import QdrantClient, models

from flink_agents.integrations.vector_stores import (
    DEFAULT_INDEXES,
    CollectionMismatchError,
    FieldMatch,
    Filter,
    VectorStoreError,
    open_vector_store,
    point_id,
)
from flink_agents.integrations.vector_stores.client import QdrantClientVectorStore
from tests.integrations.vector_stores.conftest import DIM, MODEL, SERVER_SKIP, unit
from tests.integrations.vector_stores.test_conformance import item

needs_server = pytest.mark.skipif(not os.environ.get("QDRANT_URL"), reason=SERVER_SKIP)


@pytest.fixture
def raw() -> Iterator[QdrantClient]:
    client = QdrantClient(":memory:")
    yield client
    client.close()


def test_a_collection_without_a_model_record_is_refused(raw: QdrantClient) -> None:
    """A collection someone else made (no metadata) is never written into."""
    raw.create_collection(
        "foreign", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    )
    store = QdrantClientVectorStore(client=raw)
    with pytest.raises(CollectionMismatchError, match="no flink_agents record"):
        store.ensure_collection("foreign", DIM, MODEL)
    with pytest.raises(CollectionMismatchError, match="no flink_agents record"):
        store.upsert("foreign", [item(1)])
    assert raw.count("foreign").count == 0


def test_named_vectors_and_other_distances_are_refused(raw: QdrantClient) -> None:
    """Only one unnamed cosine vector per collection is accepted."""
    params = models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    raw.create_collection("named", vectors_config={"text": params}, metadata={"flink_agents": {}})
    store = QdrantClientVectorStore(client=raw)
    with pytest.raises(CollectionMismatchError, match="named vectors"):
        store.ensure_collection("named", DIM, MODEL)


def test_the_model_record_lives_in_collection_metadata(raw: QdrantClient) -> None:
    """Dimension, model and indexes are kept where another process finds them."""
    store = QdrantClientVectorStore(client=raw)
    store.ensure_collection("mem", DIM, MODEL, indexes={"rank": "float"})
    record = raw.get_collection("mem").config.metadata["flink_agents"]
    assert record["model_id"] == MODEL
    assert record["dimension"] == DIM
    assert record["indexes"] == {**{k: str(v) for k, v in DEFAULT_INDEXES.items()}, "rank": "float"}


def test_local_mode_creates_no_payload_indexes(raw: QdrantClient) -> None:
    """Local mode ignores payload indexes: none are made, so it does not warn either."""
    store = QdrantClientVectorStore(client=raw)
    assert store.local
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store.ensure_collection("mem", DIM, MODEL, indexes={"rank": "float"})
    assert raw.get_collection("mem").payload_schema == {}


def test_constructor_needs_one_of_url_and_client(raw: QdrantClient) -> None:
    """url= and client= are exclusive and one is required."""
    with pytest.raises(ValueError, match="either"):
        QdrantClientVectorStore()
    with pytest.raises(ValueError, match="either"):
        QdrantClientVectorStore("http://localhost:6333", client=raw)


def test_close_closes_only_an_owned_client(raw: QdrantClient) -> None:
    """A store made from a url closes its client; one handed a client leaves it open."""
    borrowed = QdrantClientVectorStore(client=raw)
    borrowed.ensure_collection("mem", DIM, MODEL)
    borrowed.close()
    assert raw.collection_exists("mem")
    owned = QdrantClientVectorStore(":memory:")
    owned.close()
    with pytest.raises(VectorStoreError, match="closed"):
        owned.count("mem")


@needs_server
def test_server_round_trip_from_url() -> None:
    """open_vector_store(url, api_key) reaches the server, unlocked, with its indexes."""
    name = f"fa_test_{uuid.uuid4().hex[:12]}"
    store = open_vector_store(os.environ["QDRANT_URL"], api_key=os.environ.get("QDRANT_API_KEY"))
    try:
        assert isinstance(store, QdrantClientVectorStore)
        assert not store.local
        store.ensure_collection(name, DIM, MODEL)
        store.upsert(name, [item(n) for n in range(6)])
        hits = store.search(name, unit(1), 6, Filter(must=[FieldMatch("key", "user-1")]))
        assert {h.payload["key"] for h in hits} == {"user-1"}
        assert store.get(name, [point_id("item", 4)])[0].payload["n"] == 4
        assert set(store.collection_info(name).indexes) == set(DEFAULT_INDEXES)
    finally:
        store.drop_collection(name)
        store.close()
