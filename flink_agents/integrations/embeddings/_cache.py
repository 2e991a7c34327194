"""A small, thread-safe LRU of query vectors.

Agents repeat queries (the same question about the same user, a retry, a re-executed action),
and embedding one query is most of a long-term memory search (bench/RESULTS.md): a repeated
query should cost a dictionary look-up, not a model run.
"""

from __future__ import annotations

import threading
from collections import OrderedDict


class EmbeddingCache:
    """The ``size`` most recently used vectors, by (model id, text).

    Vectors are kept as tuples and handed out as new lists, so a caller that changes the list
    it got cannot change what the next caller gets.

    Args:
        size: vectors kept; the least recently used one is dropped first. 0 keeps none.
    """

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"size must be >= 0, got {size}")
        self._size = size
        self._lock = threading.Lock()
        self._vectors: OrderedDict[tuple[str, str], tuple[float, ...]] = OrderedDict()

    @property
    def size(self) -> int:
        """How many vectors it keeps at most."""
        return self._size

    def __len__(self) -> int:
        return len(self._vectors)

    def get(self, model_id: str, text: str) -> list[float] | None:
        """The vector cached for ``text`` under ``model_id`` (a fresh list), or None."""
        key = (model_id, text)
        with self._lock:
            vector = self._vectors.get(key)
            if vector is None:
                return None
            self._vectors.move_to_end(key)
        return list(vector)

    def put(self, model_id: str, text: str, vector: list[float]) -> None:
        """Keep ``vector`` (copied) for ``text`` under ``model_id``."""
        if not self._size:
            return
        key, kept = (model_id, text), tuple(vector)
        with self._lock:
            self._vectors[key] = kept
            self._vectors.move_to_end(key)
            while len(self._vectors) > self._size:
                self._vectors.popitem(last=False)

    def clear(self) -> None:
        """Forget every vector."""
        with self._lock:
            self._vectors.clear()
