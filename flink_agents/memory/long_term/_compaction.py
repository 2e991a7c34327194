"""Capacity management: bringing a memory set back under its capacity, in the background.

``Compactor`` owns a small thread pool. ``schedule`` never blocks: a set already being
compacted is only marked to be checked again when its job ends. Each pass writes its
replacement items first and deletes what they replace after, so a pass that fails anywhere
loses nothing (at worst a summary and the items it covers both remain until the next pass).
A failed pass is retried with exponential backoff; after the last attempt the error is
logged and kept in ``errors`` (the latest ``ERRORS_KEPT``), and the next ``add`` to the set
schedules it again.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tenacity import Retrying, stop_after_attempt, wait_exponential

from flink_agents._ids import compacted_item_ids
from flink_agents.api import (
    BaseChatModel,
    CapacityManageStrategy,
    ChatMessage,
    FlinkAgentsError,
    MemorySetItem,
    MessageRole,
)
from flink_agents.memory.long_term._codec import (
    TYPE_CHAT,
    SetSettings,
    encode_value,
    strategy_of,
    text_of,
    to_seconds,
)
from flink_agents.memory.long_term._core import MemoryCore

logger = logging.getLogger(__name__)

ERRORS_KEPT = 100
"""Passes given up that ``Compactor.errors`` keeps, the newest: a store that is down fails
the pass of every set added to, and each error holds its traceback's frames."""

SUMMARY_INSTRUCTIONS = (
    "You condense an agent's older memories into one memory. Keep every fact, preference, "
    "decision and open question; drop greetings and repetition. Answer with the summary only."
)


class CompactionError(FlinkAgentsError):
    """A compaction pass cannot work (no chat model, a strategy that returns too much)."""


class Compactor:
    """Runs compaction passes for (key, set) pairs on a small pool of daemon threads.

    Args:
        core: where the sets live.
        chat_model: folds items for ``SUMMARIZE``; None makes such sets fail to compact.
        summarize_target: ``SUMMARIZE`` folds the oldest items until the set holds this
            fraction of its capacity, so an LLM call is paid once per many adds, not per add.
        workers: pool threads.
        attempts: tries per pass before it is given up until the next add.
        initial_wait, max_wait: exponential backoff between tries, in seconds.
    """

    def __init__(
        self,
        core: MemoryCore,
        chat_model: BaseChatModel | None = None,
        *,
        summarize_target: float = 0.5,
        workers: int = 1,
        attempts: int = 5,
        initial_wait: float = 0.5,
        max_wait: float = 30.0,
    ) -> None:
        if not 0 < summarize_target <= 1:
            raise ValueError("summarize_target must be in (0, 1]")
        self.core = core
        self.chat_model = chat_model
        self.summarize_target = summarize_target
        self.attempts = attempts
        self.initial_wait = initial_wait
        self.max_wait = max_wait
        self.observer: Any = None
        """Told of each compaction (a ``LongTermObserver``: the runtime's metrics)."""
        self.errors: deque[BaseException] = deque(maxlen=ERRORS_KEPT)
        """The latest passes given up after their last attempt (newest last), for inspection:
        at most ``ERRORS_KEPT``, however many sets failed."""
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="flink-agents-compaction")
        # Background jobs that pause (access records, paced and gathered over an interval)
        # run beside the pool: sleeping in a pool worker held up the passes queued behind it.
        # Its thread starts with the first such job.
        self._side = ThreadPoolExecutor(1, thread_name_prefix="flink-agents-access")
        self._idle = threading.Condition()
        self._running: set[tuple[str, str]] = set()
        self._again: set[tuple[str, str]] = set()
        self._jobs = 0
        self._closed = False

    # -- scheduling --------------------------------------------------------------------------

    def schedule(self, key: str, name: str) -> None:
        """Compact the set soon (on the pool); returns at once."""
        with self._idle:
            if self._closed:
                return
            if (key, name) in self._running:
                self._again.add((key, name))
                return
            self._running.add((key, name))
        self.submit(lambda: self._run(key, name), counted=False)

    def submit(self, job: Callable[[], Any], *, counted: bool = True, beside: bool = False) -> None:
        """Run ``job`` on the pool (``beside``: on the thread beside it, for a job that
        pauses), counted by ``wait`` (its errors are logged)."""
        with self._idle:
            if self._closed:
                return
            self._jobs += 1

        def run() -> None:
            try:
                job()
            except Exception:
                logger.exception("long-term memory background job failed")
            finally:
                with self._idle:
                    self._jobs -= 1
                    self._idle.notify_all()

        (self._side if beside else self._pool).submit(run)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no pass or background job is queued or running; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._jobs == 0, timeout)

    def close(self) -> None:
        """Stop taking work and wait for what is running."""
        with self._idle:
            self._closed = True
        self._side.shutdown(wait=True, cancel_futures=True)
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _run(self, key: str, name: str) -> None:
        while True:
            try:
                for attempt in Retrying(
                    stop=stop_after_attempt(self.attempts),
                    wait=wait_exponential(multiplier=self.initial_wait, max=self.max_wait),
                    reraise=True,
                ):
                    with attempt:
                        self.compact_once(key, name)
            except Exception as error:
                logger.warning(
                    "compaction of memory set %r (key %r) failed after %d attempts: %s; "
                    "nothing was lost, the next add tries again",
                    name,
                    key,
                    self.attempts,
                    error,
                )
                self.errors.append(error)
            with self._idle:
                if (key, name) in self._again and not self._closed:
                    self._again.discard((key, name))
                    continue
                self._running.discard((key, name))
                return

    # -- one pass ----------------------------------------------------------------------------

    def compact_once(self, key: str, name: str) -> None:
        """Bring one set under its capacity now, in this thread (a no-op if it is under)."""
        settings = self.core.settings(key, name)
        if settings is None or settings.capacity is None:
            return
        strategy = strategy_of(settings.strategy)
        if strategy == CapacityManageStrategy.TRIM:
            trimmed = self.core.trim(key, name, settings.capacity)
            if not trimmed:
                return
            stored = settings.capacity + trimmed
        else:
            stored = self.core.count(key, name)
            if stored <= settings.capacity:
                return
            # At most the items counted: an ordered read without a limit counts them again.
            items = self.core.items(key, name, limit=stored)
            if len(items) <= settings.capacity:
                return
            if strategy == CapacityManageStrategy.SUMMARIZE:
                self._summarize(key, settings, items)
            else:
                self._custom(key, settings, items, strategy)
        if self.observer is not None:
            self.observer.long_term_memory_compacted()
        logger.info(
            "compacted memory set %r of key %r: %d items over its capacity of %d (%s)",
            name,
            key,
            stored,
            settings.capacity,
            getattr(strategy, "value", getattr(strategy, "__name__", strategy)),
        )

    def _summarize(self, key: str, settings: SetSettings, items: list[MemorySetItem]) -> None:
        if self.chat_model is None:
            raise CompactionError(
                f"memory set {settings.name!r} summarizes, but long-term memory has no chat "
                "model (pass chat_model=)"
            )
        assert settings.capacity is not None
        target = max(1, math.floor(settings.capacity * self.summarize_target))
        folded = items[: len(items) - target + 1]
        summary = self.summarize(folded)
        value: Any = summary
        if settings.item_type == TYPE_CHAT:
            value = ChatMessage(role=MessageRole.SYSTEM, content=summary)
        self._replace(key, settings, folded, [value], keep=())

    def summarize(self, items: list[MemorySetItem]) -> str:
        """The chat model's summary of ``items`` (oldest first)."""
        assert self.chat_model is not None
        lines = []
        for item in items:
            start, end = item.created_range
            when = start.isoformat(timespec="seconds")
            if end != start:
                when += " to " + end.isoformat(timespec="seconds")
            text = text_of(item.item)
            if isinstance(item.item, ChatMessage):
                text = f"{item.item.role.value}: {text}"
            lines.append(f"- [{when}] {text}")
        request = [
            ChatMessage(role=MessageRole.SYSTEM, content=SUMMARY_INSTRUCTIONS),
            ChatMessage(
                role=MessageRole.USER,
                content="Summarize these memories (oldest first):\n" + "\n".join(lines),
            ),
        ]
        reply = self.chat_model.chat(request).message.text.strip()
        if not reply:
            raise CompactionError("the chat model returned an empty summary")
        return reply

    def _custom(
        self, key: str, settings: SetSettings, items: list[MemorySetItem], function: Any
    ) -> None:
        assert settings.capacity is not None
        result = list(function(list(items), settings.capacity))
        if len(result) > settings.capacity:
            raise CompactionError(
                f"compaction function of memory set {settings.name!r} returned {len(result)} "
                f"entries for a capacity of {settings.capacity}"
            )
        known = {i.id for i in items}
        keep = {r.id for r in result if isinstance(r, MemorySetItem) and r.id in known}
        new = [r for r in result if not (isinstance(r, MemorySetItem) and r.id in known)]
        replaced = [i for i in items if i.id not in keep]
        values = [r.item if isinstance(r, MemorySetItem) else r for r in new]
        self._replace(key, settings, replaced, values, keep=keep)

    def _replace(
        self,
        key: str,
        settings: SetSettings,
        replaced: list[MemorySetItem],
        values: list[Any],
        keep: Any,
    ) -> None:
        """Write ``values`` as compacted items covering ``replaced``, then delete those."""
        if not replaced:
            return
        start = min(to_seconds(i.created_range[0]) for i in replaced)
        end = max(to_seconds(i.created_range[1]) for i in replaced)
        tags: dict[str, float] = {}
        for item in replaced:
            for tag, weight in item.tags.items():
                tags[tag] = max(weight, tags.get(tag, weight))
        sources = {i.source for i in replaced}
        source = sources.pop() if len(sources) == 1 else None
        encoded = [encode_value(settings.item_type, v, settings.name) for v in values]
        # Deterministic ids: a retried pass over the same items overwrites its own output.
        ids = compacted_item_ids(
            key, settings.name, replaced[0].id, replaced[-1].id, len(replaced), len(encoded)
        )
        written = self.core.write(
            key,
            settings,
            encoded,
            ids=ids,
            tags=[tags] * len(encoded),
            source=source,
            created=(start, end),
            compacted=True,
            require_set=True,
        )
        if encoded and not written:
            return  # the set was deleted meanwhile
        self.core.delete(key, settings.name, [i.id for i in replaced if i.id not in keep])
