"""The threads on which plain durable functions run (``durable_execute_async`` of a plain
function), and how they stop: waiting for the calls running on them, for a bounded time
when the subtask stops before its input ends (``stop-wait-ms``).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from flink_agents.runtime._deadline import Deadline


class CallThreads(ThreadPoolExecutor):
    """A ``ThreadPoolExecutor`` that keeps its threads, so that ``stop`` can wait for the
    calls running on them for a bounded time (``shutdown`` waits for all or none)."""

    def __init__(self, max_workers: int, thread_name_prefix: str) -> None:
        threads: list[threading.Thread] = []
        # Each thread adds itself when it starts; the list, not the executor, is what the
        # threads hold, so an executor nobody references still ends its idle threads.
        super().__init__(
            max_workers=max_workers,
            thread_name_prefix=thread_name_prefix,
            initializer=lambda: threads.append(threading.current_thread()),
        )
        self._threads_started = threads

    def stop(self, timeout: float | None = None) -> int:
        """Take no more calls and wait for the running ones, at most ``timeout`` seconds
        (None: until they end). Calls queued but not started are cancelled. Returns how many
        calls were still running then: each thread ends once its call returns."""
        if timeout is None:
            self.shutdown(wait=True)
            return 0
        self.shutdown(wait=False, cancel_futures=True)
        left = Deadline(timeout).left
        for thread in list(self._threads_started):
            thread.join(left())
        return sum(thread.is_alive() for thread in self._threads_started)
