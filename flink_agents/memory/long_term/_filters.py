"""Store filters for a key's memory set, the user-facing search filters, and tag scoring."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from flink_agents.api import MemorySetItem
from flink_agents.integrations.vector_stores import (
    FieldMatch,
    FieldMatchAny,
    FieldRange,
    Filter,
)
from flink_agents.memory.long_term._codec import ITEM_KINDS, KIND_COMPACTED, KIND_ITEM, to_seconds

SEARCH_FILTERS = ("tags", "source", "compacted", "created_after", "created_before")


def set_filter(key: str, name: str) -> Filter:
    """Every point of one key's set (its items and its settings)."""
    return Filter(must=[FieldMatch("key", key), FieldMatch("set", name)])


def items_filter(key: str, name: str, *extra: Any) -> Filter:
    """The items (plain or compacted) of one key's set, and ``extra`` conditions."""
    return Filter(
        must=[
            FieldMatch("key", key),
            FieldMatch("set", name),
            FieldMatchAny("kind", list(ITEM_KINDS)),
            *extra,
        ]
    )


def _labels(value: Any, what: str) -> list[str]:
    labels = [value] if isinstance(value, str) else list(value)
    if not all(isinstance(v, str) for v in labels):
        raise TypeError(f"search filter {what!r} takes a str or a list of str, got {value!r}")
    return labels


def search_conditions(filters: Mapping[str, Any] | None) -> list[Any]:
    """The conditions ``MemorySet.search``'s ``filters`` ask for.

    Raises:
        ValueError: an unknown filter name.
    """
    conditions: list[Any] = []
    for name, value in (filters or {}).items():
        if name in ("tags", "source"):
            conditions.append(FieldMatchAny(name, _labels(value, name)))
        elif name == "compacted":
            conditions.append(FieldMatch("kind", KIND_COMPACTED if value else KIND_ITEM))
        elif name == "created_after":
            conditions.append(FieldRange("created_time", gte=to_seconds(value)))
        elif name == "created_before":
            conditions.append(FieldRange("created_time", lte=to_seconds(value)))
        else:
            raise ValueError(f"unknown search filter {name!r}; use one of {SEARCH_FILTERS}")
    return conditions


def score(item: MemorySetItem, weights: Mapping[str, float]) -> float:
    """Seed 004's score: the sum of the query weights of the tags the item carries (each
    times the item's own weight for that tag, 1 unless it was given one)."""
    return sum(weight * item.tags[tag] for tag, weight in weights.items() if tag in item.tags)


def best(items: Iterable[MemorySetItem], weights: Mapping[str, float]) -> list[MemorySetItem]:
    """The items at the best score above zero, newest first; empty if none scores above 0."""
    scored = [(score(item, weights), item) for item in items]
    top = max((s for s, _ in scored), default=0.0)
    if top <= 0:
        return []
    # Sums of float weights: equal scores may differ in the last bits.
    winners = [item for s, item in scored if math.isclose(s, top, rel_tol=1e-9)]
    return sorted(winners, key=lambda item: item.created_range[1], reverse=True)
