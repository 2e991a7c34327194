"""A job's heartbeat in its action log: what keeps other jobs from expiring it while it runs.

``ActionLog.expire_jobs`` removes a job with a generated name once neither its rows nor its
marker's ``seen_ms`` are within its retention window. A running job can write nothing for
longer than that (no input, or one durable call that takes longer than the window) and
still need its rows: an action parked on a slow call needs its earlier calls after a
restore. So each attempt marks its job again every quarter of the window, from a daemon
thread of its own, for as long as the attempt runs; the window is then never crossed
without a mark while a process of the job is alive.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable

from flink_agents.runtime.action_log._base import ActionLog, JobMarker

logger = logging.getLogger(__name__)

MIN_PERIOD_S = 0.01
"""The shortest period between two marks, whatever the window (tests use windows of a few
milliseconds)."""


class JobHeartbeat:
    """Marks ``marker``'s job in ``log`` now, then every ``period_s`` until ``stop``.

    A failed mark is logged and tried again at the next beat (the job's own operations
    report a failing log); a closed log ends the beats.
    """

    def __init__(
        self, log: ActionLog, marker: JobMarker, clock: Callable[[], int], period_s: float
    ) -> None:
        self._log = log
        self._marker = marker
        self._clock = clock
        self._period_s = max(period_s, MIN_PERIOD_S)
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def mark(self) -> None:
        """Mark the job now, on the caller's thread; the log's errors pass."""
        self._log.mark_job(dataclasses.replace(self._marker, seen_ms=self._clock()))

    def start(self) -> None:
        """Beat from a daemon thread, the first beat one period from now."""
        thread = threading.Thread(
            target=self._run, name=f"action-log-heartbeat-{self._marker.job}", daemon=True
        )
        thread.start()
        self._thread = thread  # once running: ``stop`` joins only a thread that started

    def stop(self, wait: bool = True) -> None:
        """No beat after this returns (``wait``: one under way is waited for). Idempotent."""
        self._stopped.set()
        thread = self._thread
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        failing = False
        while not self._stopped.wait(self._period_s):
            try:
                self.mark()
            except RuntimeError:  # the log was closed under us: nothing left to keep
                return
            except Exception as error:
                if not failing:
                    logger.warning(
                        "action log %s: marking job %s alive failed (tried again every %.1f s)"
                        ": %s",
                        self._log.name,
                        self._marker.job,
                        self._period_s,
                        self._log.redact(f"{type(error).__name__}: {error}"),
                    )
                failing = True
            else:
                failing = False
