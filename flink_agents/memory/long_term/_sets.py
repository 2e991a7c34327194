"""A key's view of long-term memory: its memory sets, read and written through ``MemoryCore``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from flink_agents._ids import durable_name
from flink_agents.api import (
    CapacityManageStrategy,
    LongTermMemory,
    MemorySet,
    MemorySetItem,
    MemorySetNotFoundError,
)
from flink_agents.api.internal import CompactionFunction, Tags, normalize_tags
from flink_agents.integrations.vector_stores import FieldMatchAny
from flink_agents.memory._identity import IdMinter
from flink_agents.memory.long_term._codec import (
    TYPE_JSON,
    SetSettings,
    encode_value,
    strategy_name,
    strategy_of,
    type_name,
    type_of,
)
from flink_agents.memory.long_term._filters import best, search_conditions

if TYPE_CHECKING:
    from flink_agents.memory.long_term._memory import VectorLongTermMemory


class KeyedLongTermMemory(LongTermMemory):
    """The memory sets of one key.

    Args:
        owner: the long-term memory object (store, embedding, compaction pool).
        key: the key, as stored (see ``key_text``).
        ids: the writing action's id minter (one per action execution, shared by every view
            the action opens), so a re-executed action overwrites its own items. None
            (direct use outside an action) gives random ids.
    """

    def __init__(self, owner: VectorLongTermMemory, key: str, ids: IdMinter | None = None) -> None:
        self.owner = owner
        self.key = key
        self.ids = ids if ids is not None else IdMinter()

    def create_memory_set(
        self,
        name: str,
        item_type: type = str,
        capacity: int | None = None,
        capacity_manage_strategy: CapacityManageStrategy | str | CompactionFunction = (
            CapacityManageStrategy.TRIM
        ),
    ) -> MemorySet:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a memory set name is a non-empty str, got {name!r}")
        if capacity is not None and (isinstance(capacity, bool) or capacity < 1):
            raise ValueError(f"capacity must be a positive int or None, got {capacity!r}")
        wanted = SetSettings(
            name, type_name(item_type), capacity, strategy_name(capacity_manage_strategy)
        )
        found = self.owner.core.settings(self.key, name, known=True)
        if found is None:
            self.owner.core.save_settings(self.key, wanted)
        elif found != wanted:
            raise ValueError(
                f"memory set {name!r} exists with other settings ({found}); delete it first, "
                "or open it with get_memory_set"
            )
        return StoredMemorySet(self, wanted)

    def get_memory_set(self, name: str) -> MemorySet:
        found = self.owner.core.settings(self.key, name, known=True)
        if found is None:
            raise MemorySetNotFoundError(f"no memory set {name!r} for this key")
        return StoredMemorySet(self, found)

    def delete_memory_set(self, name: str) -> bool:
        return self.owner.core.drop_set(self.key, name)

    def new_ids(self, name: str, count: int) -> list[str]:
        """Ids for the next ``count`` items written to set ``name``."""
        return self.ids.point_ids("ltm", name, count)


class StoredMemorySet(MemorySet):
    """A memory set of one key, stored as points of kind ``item``/``compacted``."""

    def __init__(self, view: KeyedLongTermMemory, settings: SetSettings) -> None:
        self._view = view
        self._settings = settings
        self._core = view.owner.core
        self._key = view.key

    def __repr__(self) -> str:
        return f"StoredMemorySet({self._settings})"

    @property
    def name(self) -> str:
        return self._settings.name

    @property
    def item_type(self) -> type:
        return type_of(self._settings.item_type)

    @property
    def capacity(self) -> int | None:
        return self._settings.capacity

    @property
    def capacity_manage_strategy(self) -> CapacityManageStrategy | CompactionFunction:
        return strategy_of(self._settings.strategy)

    def add(
        self,
        item: Any | Sequence[Any] = None,
        *,
        items: Sequence[Any] | None = None,
        tags: Tags | str | None = None,
        source: str | None = None,
    ) -> list[str]:
        if items is None:
            many = isinstance(item, list | tuple) and self._settings.item_type != TYPE_JSON
            items = list(item) if many else [item]
        elif item is not None:
            raise TypeError("give item= or items=, not both")
        if source is not None and not isinstance(source, str):
            raise TypeError(f"source is a str label, got {source!r}")
        weights = normalize_tags(tags)
        encoded = [encode_value(self._settings.item_type, v, self.name) for v in items]
        if not encoded:
            return []
        ids = self._view.new_ids(self.name, len(encoded))
        # Embedded in a shared batch and stored in the background; this key's reads wait
        # for it, and the action completes only once it is stored (``IdMinter.track``).
        landed = self._core.write_later(
            self._key,
            self._settings,
            encoded,
            ids=ids,
            tags=[weights] * len(encoded),
            source=source,
            then=self._check_capacity if self._settings.capacity is not None else None,
        )
        self._view.ids.track(landed)
        observer = self._view.owner.observer
        if observer is not None:
            observer.long_term_memory_added(len(ids))
        return ids

    def _check_capacity(self) -> None:
        """Schedule compaction when the set holds more than its capacity (after an add)."""
        core = self._core
        if core.stored_count(self._key, self.name) > self._settings.capacity:
            self._view.owner.compactor.schedule(self._key, self.name)

    def get(self, ids: str | Sequence[str] | None = None) -> list[MemorySetItem]:
        if ids is None:
            found = self._core.items(self._key, self.name)
        else:
            found = self._core.by_ids(self._key, self.name, [ids] if isinstance(ids, str) else ids)
        return self._accessed(found)

    def get_recent(self, n: int) -> list[MemorySetItem]:
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        newest = self._core.items(self._key, self.name, limit=n, newest_first=True) if n else []
        return self._accessed(newest[::-1])

    @durable_name("flink_agents.memory.long_term._sets:StoredMemorySet.search")
    def search(
        self, query: str, limit: int = 10, filters: Mapping[str, Any] | None = None
    ) -> list[MemorySetItem]:
        conditions = search_conditions(filters)
        found = self._core.search(self._key, self.name, query, limit, conditions)
        observer = self._view.owner.observer
        if observer is not None:
            observer.long_term_memory_searched()
        return self._accessed(found)

    def delete(self, ids: str | Sequence[str] | None = None) -> None:
        self._core.delete(self._key, self.name, [ids] if isinstance(ids, str) else ids)

    def retrieve(self, tags: Tags | str) -> MemorySetItem | None:
        winners = self._tagged(tags)
        return self._accessed(winners[:1])[0] if winners else None

    def retrieve_all(self, tags: Tags | str) -> list[MemorySetItem]:
        return self._accessed(self._tagged(tags))

    def size(self) -> int:
        return self._core.count(self._key, self.name)

    def _tagged(self, tags: Tags | str) -> list[MemorySetItem]:
        weights = normalize_tags(tags)
        if not weights:
            return []
        # Only items carrying a query tag can score: let the store's tag index find them.
        candidates = self._core.items(self._key, self.name, FieldMatchAny("tags", list(weights)))
        return best(candidates, weights)

    def _accessed(self, items: list[MemorySetItem]) -> list[MemorySetItem]:
        """Record the read in the background (it rewrites points: never block the action)."""
        owner = self._view.owner
        if items and owner.track_access:
            owner.access.record(self._key, self.name, [i.id for i in items])
        return items
