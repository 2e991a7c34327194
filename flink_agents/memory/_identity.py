"""Ids for what one action execution writes outside Flink state, minted in one place.

An action writes long-term memory items, knowledge items and (through ``ctx.external_id()``)
rows or messages of its own outside Flink. After a failure the action may run again; its
writes must then overwrite what the earlier execution wrote, never add to it. So every id is
derived from the action's identity (job, key, run, step, action) and a counter, and the
counters belong to the *execution*: one ``IdMinter`` per action execution, owned by its
context and shared by every path to every store. A fresh view of long-term memory, a second
``get_memory_set`` of the same set or another set all draw from the same minter, so two
items of one action never share an id, and the n-th item of a re-executed action gets the
id the n-th item got before.

Counters are kept per scope (``("ltm", set name)``, ``("knowledge", set name)``,
``("external",)``), so the ids of one set do not shift when the action writes more or fewer
items to another.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError

from flink_agents._ids import IdentityParts, external_id, point_id


class IdMinter:
    """Deterministic ids for one action execution.

    Args:
        identity: the action's identity parts, or a function computing them, called once on
            first use (building it costs a ``repr`` of the key: off the hot path for actions
            that write nothing outside Flink). None mints random ids (direct use of
            long-term memory outside an action).
    """

    __slots__ = ("_counters", "_identity", "_lock", "_resolve", "_writes")

    def __init__(self, identity: IdentityParts | Callable[[], IdentityParts] | None = None) -> None:
        self._resolve = identity if callable(identity) else None
        self._identity: tuple[str | int, ...] | None = (
            None if identity is None or callable(identity) else tuple(identity)
        )
        self._counters: dict[tuple[str, ...], int] = {}
        self._lock = threading.Lock()  # an action may hand its context to its own threads
        self._writes: list[Future[None]] = []

    @property
    def deterministic(self) -> bool:
        return self._identity is not None or self._resolve is not None

    def identity(self) -> tuple[str | int, ...] | None:
        if self._resolve is not None:
            self._identity, self._resolve = tuple(self._resolve()), None
        return self._identity

    def point_ids(self, scope: str, name: str, count: int) -> list[str]:
        """Ids for the next ``count`` points written to ``scope``'s set ``name``."""
        identity = self.identity()
        if identity is None:
            return [str(uuid.uuid4()) for _ in range(count)]
        first = self._take((scope, name), count)
        return [point_id(*identity, scope, name, first + n) for n in range(count)]

    def external_id(self) -> str:
        """The id of the action's next external write (see ``RunnerContext.external_id``)."""
        identity = self.identity()
        if identity is None:
            return str(uuid.uuid4())
        return external_id(identity, self._take(("external",), 1))

    def track(self, write: Future[None]) -> None:
        """A write made under these ids that completes in the background (an item whose
        embedding is batched): the action is complete only once it has landed."""
        with self._lock:
            self._writes.append(write)

    def landing(self) -> Future[None] | None:
        """None when every write tracked so far has landed; else a future that is done when
        they all have, failing with the first failure. Each write is reported once."""
        with self._lock:
            writes, self._writes = self._writes, []
        waiting = []
        for write in writes:
            if not write.done():
                waiting.append(write)
            elif write.exception() is not None:
                return write
        if not waiting:
            return None
        if len(waiting) == 1:
            return waiting[0]
        landed: Future[None] = Future()
        left = [len(waiting)]
        count_lock = threading.Lock()

        def one_landed(write: Future[None]) -> None:
            error = write.exception()
            with count_lock:
                left[0] -= 1
                last = left[0] == 0
            with contextlib.suppress(InvalidStateError):  # an earlier write failed first
                if error is not None:
                    landed.set_exception(error)
                elif last:
                    landed.set_result(None)

        for write in waiting:
            write.add_done_callback(one_landed)
        return landed

    def _take(self, scope: tuple[str, ...], count: int) -> int:
        with self._lock:
            first = self._counters.get(scope, 0)
            self._counters[scope] = first + count
        return first
