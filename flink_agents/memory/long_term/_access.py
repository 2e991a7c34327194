"""Recording reads (``last_accessed_time``) in batches, off the action's path.

Recording a read rewrites the items' points. Doing it once per search cost about 2.5 ms of
every search on 2 cores (bench/RESULTS.md), so reads are gathered per memory set and written
by one background job at most every ``interval`` seconds, as a payload update (no vector
rewrite).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

Touch = Callable[[str, str, Sequence[str]], None]
Submit = Callable[[Callable[[], None]], None]


class AccessRecorder:
    """Gathers read item ids per (key, set) and flushes them through ``touch`` in the
    background (``submit``: the compaction pool, so ``wait_for_compaction`` covers it)."""

    def __init__(self, touch: Touch, submit: Submit, interval: float = 0.25) -> None:
        self._touch = touch
        self._submit = submit
        self._interval = interval
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str], dict[str, None]] = {}
        self._scheduled = False
        self._last_flush = 0.0

    def record(self, key: str, name: str, ids: Sequence[str]) -> None:
        with self._lock:
            self._pending.setdefault((key, name), {}).update(dict.fromkeys(ids))
            if self._scheduled:
                return
            self._scheduled = True
        self._submit(self._flush_later)

    def _flush_later(self) -> None:
        pause = self._last_flush + self._interval - time.monotonic()
        if pause > 0:
            time.sleep(pause)  # more reads gather meanwhile
        self.flush()

    def flush(self) -> None:
        """Write every gathered read now."""
        with self._lock:
            pending, self._pending = self._pending, {}
            self._scheduled = False
            self._last_flush = time.monotonic()
        for (key, name), ids in pending.items():
            self._touch(key, name, list(ids))
