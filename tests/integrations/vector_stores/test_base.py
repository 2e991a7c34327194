"""The public surface and the backend-neutral model: names, filters, ids."""

from __future__ import annotations

import uuid

import pytest

import flink_agents.integrations.vector_stores as vector_stores
from flink_agents.integrations.vector_stores import (
    FieldMatch,
    FieldMatchAny,
    FieldRange,
    Filter,
    HasId,
    point_id,
)
from flink_agents.integrations.vector_stores._base import validate_collection_name


def test_public_names_are_pinned() -> None:
    """The package exports exactly these names; change this list only on purpose."""
    assert sorted(vector_stores.__all__) == [
        "CollectionInfo",
        "CollectionMismatchError",
        "CollectionNotFoundError",
        "DEFAULT_INDEXES",
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
    for name in vector_stores.__all__:
        assert hasattr(vector_stores, name)


def test_point_id_is_a_deterministic_uuid() -> None:
    """The same parts give the same UUID; different parts (or splits) another."""
    first = point_id("user-1", 7, 2, 0)
    assert first == point_id("user-1", 7, 2, 0)
    assert str(uuid.UUID(first)) == first
    assert first != point_id("user-1", 7, 2, 1)
    assert point_id("a", "bc") != point_id("ab", "c")


def test_filter_conditions_validate_their_values() -> None:
    """Conditions refuse values some backend would mishandle."""
    with pytest.raises(TypeError):
        FieldMatch("done", True)
    with pytest.raises(TypeError):
        FieldMatch("score", 1.5)
    with pytest.raises(TypeError):
        FieldMatchAny("tags", "ab")
    with pytest.raises(TypeError):
        FieldMatchAny("tags", ["a", 1])
    with pytest.raises(ValueError, match="at least one bound"):
        FieldRange("created_time")
    with pytest.raises(ValueError, match="finite"):
        FieldRange("created_time", lt=float("inf"))
    with pytest.raises(ValueError, match="UUID"):
        HasId(["nope"])
    with pytest.raises(TypeError, match="not a filter condition"):
        Filter(must=[("key", "x")])  # type: ignore[list-item]


def test_filters_are_frozen_values() -> None:
    """Lists become tuples, so equal filters compare (and hash) equal."""
    a = Filter(must=[FieldMatchAny("tags", ["x", "y"])])
    b = Filter(must=(FieldMatchAny("tags", ("x", "y")),))
    assert a == b
    assert hash(a) == hash(b)
    assert Filter().is_empty()
    assert not a.is_empty()


@pytest.mark.parametrize("name", ["", "a/b", "..", ".hidden", "-x", "x" * 129, "é"])
def test_unsafe_collection_names_are_refused(name: str) -> None:
    """Names must be safe as a directory and as a server collection."""
    with pytest.raises(ValueError, match="collection name"):
        validate_collection_name(name)
