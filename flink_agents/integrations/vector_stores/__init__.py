"""Vector stores: where long-term memory and knowledge keep their embeddings (Qdrant).

The interface, record types and filter model are importable here. The backends live in
``edge`` (qdrant-edge-py, embedded, the default; ``shared`` lets every process of a machine
use one embedded directory) and ``client`` (a Qdrant server through qdrant-client); each
imports its engine only when its module is imported. ``open_vector_store`` picks one from a
location.
"""

from __future__ import annotations

import os
from typing import Any

from flink_agents._ids import point_id
from flink_agents.integrations.vector_stores._base import (
    DEFAULT_INDEXES,
    CollectionInfo,
    CollectionMismatchError,
    CollectionNotFoundError,
    FieldMatch,
    FieldMatchAny,
    FieldRange,
    FieldType,
    Filter,
    HasId,
    OrderBy,
    Point,
    Record,
    ScoredRecord,
    StoreLockedError,
    VectorStore,
    VectorStoreError,
)

__all__ = [
    "DEFAULT_INDEXES",
    "CollectionInfo",
    "CollectionMismatchError",
    "CollectionNotFoundError",
    "FieldMatch",
    "FieldMatchAny",
    "FieldRange",
    "FieldType",
    "Filter",
    "HasId",
    "OrderBy",
    "Point",
    "Record",
    "ScoredRecord",
    "StoreLockedError",
    "VectorStore",
    "VectorStoreError",
    "open_vector_store",
    "point_id",
]


def open_vector_store(
    location: str | os.PathLike[str], *, api_key: str | None = None, **options: Any
) -> VectorStore:
    """The store ``location`` names.

    Args:
        location: ``http://...`` or ``https://...`` for a Qdrant server; ``:memory:`` for
            qdrant-client's local mode (tests only); anything else is a directory for the
            embedded store, shared with every process of this machine that opens it
            (``shared``: the first opener hosts it and serves the others).
        api_key: the server's API key (servers only).
        **options: passed to the backend's constructor.
    """
    text = os.fspath(location)
    if text.startswith(("http://", "https://")) or text == ":memory:":
        from flink_agents.integrations.vector_stores.client import QdrantClientVectorStore

        return QdrantClientVectorStore(text, api_key=api_key, **options)
    if api_key is not None:
        raise ValueError("api_key applies to a Qdrant server URL, not to an embedded store")
    from flink_agents.integrations.vector_stores.shared import open_shared_store

    return open_shared_store(text, **options)
