"""Recording reads (``last_accessed_time``) in batches, off the action's path, and gently.

Recording a read rewrites the items' points. Doing it once per search cost about 2.5 ms of
every search on 2 cores (bench/RESULTS.md), so reads are gathered per memory set and written
by one background job at most every ``interval`` seconds, as a payload update (no vector
rewrite).

Written all at once, one interval's reads (a few hundred sets under steady searching) were
still a burst of tens of milliseconds of store work that competed with the searches running
meanwhile for the 2 cores; the searches caught in it were the slowest 5%. So the background
job paces itself: after each set it pauses ``pace`` times as long as that set took, so it
takes at most about ``1 / (1 + pace)`` of a core, and every pause hands the GIL back at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

Touch = Callable[[str, str, Sequence[str]], None]
Submit = Callable[[Callable[[], None]], None]


class AccessRecorder:
    """Gathers read item ids per (key, set) and flushes them through ``touch`` in the
    background (``submit``: the thread beside the compaction pool, so that its pauses hold
    up no compaction and ``wait_for_compaction`` covers it).

    Args:
        touch: writes ``last_accessed_time`` of some items of one key's set.
        submit: runs a job in the background.
        interval: seconds between background writes at most; reads gathered meanwhile are
            written together (an item read many times is written once).
        pace: pause after each set's write, as a multiple of the time it took; the pauses of
            one write add up to at most ``interval / 2``, so a write still ends well before
            the next one is due. 0 writes without pausing.
        sleep: how to pause (tests pass a recorder).
    """

    def __init__(
        self,
        touch: Touch,
        submit: Submit,
        interval: float = 0.25,
        *,
        pace: float = 3.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if pace < 0:
            raise ValueError(f"pace must be >= 0, got {pace}")
        self._touch = touch
        self._submit = submit
        self._interval = interval
        self._pace = pace
        self._sleep = sleep
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
            self._sleep(pause)  # more reads gather meanwhile
        self._write(self._take(), paced=True)

    def flush(self) -> None:
        """Write every gathered read now (unpaced)."""
        self._write(self._take(), paced=False)

    def _take(self) -> dict[tuple[str, str], dict[str, None]]:
        with self._lock:
            pending, self._pending = self._pending, {}
            self._scheduled = False  # reads from now on queue the next write
            self._last_flush = time.monotonic()
        return pending

    def _write(self, pending: dict[tuple[str, str], dict[str, None]], paced: bool) -> None:
        budget = self._interval / 2 if paced else 0.0
        last = len(pending) - 1
        for n, ((key, name), ids) in enumerate(pending.items()):
            began = time.perf_counter()
            self._touch(key, name, list(ids))
            if self._pace and budget > 0 and n < last:
                pause = min(self._pace * (time.perf_counter() - began), budget)
                budget -= pause
                self._sleep(pause)
