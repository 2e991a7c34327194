"""What a ``RunEngine`` starts besides runs, and how it stops it all: the executor of
durable calls, the event loop of ``async def`` durable functions, the engines of sub-agents,
the factories of call recorders and write identities its contexts use, and ``close``.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from flink_agents._ids import key_text
from flink_agents.runtime._call_threads import CallThreads
from flink_agents.runtime._deadline import Deadline
from flink_agents.runtime.journal import CallRecorder, Lookup

if TYPE_CHECKING:  # (it imports asyncio: see ``_get_call_loop``)
    from flink_agents.runtime._call_loop import CallLoop

# The engine's logger, under the name it had when this lived in ``_engine``.
logger = logging.getLogger("flink_agents.runtime._engine")


class EngineServices:
    """The services part of ``RunEngine`` (a base class of it; a sub-agent's engine uses
    its parent's executor, loop, long-term memory and journal)."""

    @property
    def executor(self) -> CallThreads:
        return self._get_executor()

    def _get_executor(self) -> CallThreads:
        """The executor of durable calls (the parent's for a sub-agent), made on first use."""
        if self._parent is not None:
            return self._parent.executor
        if self._executor is None:
            self._executor = CallThreads(
                max_workers=self.options.num_async_threads,
                thread_name_prefix="flink-agents-async",
            )
        return self._executor

    def _get_call_loop(self) -> CallLoop:
        """The event loop of ``async def`` durable functions (the parent's for a
        sub-agent), started by the first such call."""
        if self._parent is not None:
            return self._parent._get_call_loop()
        if self._call_loop is None:
            # Imported here: it imports asyncio, which a run without ``async def`` durable
            # calls never needs (it lengthens a Flink operator's start: bench/RESULTS.md).
            from flink_agents.runtime._call_loop import CallLoop

            self._call_loop = CallLoop()
        return self._call_loop

    def start_async_threads(self) -> None:
        """Start all ``num-async-threads`` threads of the executor now, when the plan has
        ``async def`` actions of its own or resources (which the built-in ``async def``
        chat, tool and retrieval actions use); else nothing: such a plan makes no async call.

        ``ThreadPoolExecutor`` starts one thread per ``submit`` until it has them all, and
        ``Thread.start`` waits for the new thread to run. In PyFlink's thread mode the new
        thread must win the GIL from the operator and the upstream task first, while the
        operator's thread waits, so the first burst of records started its calls at a
        fraction of the usual rate (measured in ``bench/RESULTS.md``). The
        dispatcher calls this when it opens in thread mode, before any record arrives.
        """
        own = {spec.name for spec in self.plan.plan.actions}
        if not self.plan.resources and not any(
            a.is_async for a in self.plan.actions if a.name in own
        ):
            return
        executor = self.executor
        release = threading.Event()
        # Each task blocks until all are submitted, so no thread is idle and every submit
        # starts a new one; then they all return and wait for calls (released even when a
        # submit fails: those started would otherwise block for ever).
        try:
            for _ in range(self.options.num_async_threads):
                executor.submit(release.wait)
        finally:
            release.set()

    def close(self, wait_s: float | None = None) -> None:
        """Drain the call loop and stop the executor (waiting for running calls, which
        record their results), let compactions finish, close the resources (an MCP server's
        session, an async client on the loop), stop the loop, then write the journal's
        queued records and close its log.

        ``wait_s`` bounds the wait for calls, compactions and stores in all (None: until they
        end). A call still running then is given up, its outcome not recorded (a restore
        makes it again): the loop cancels its coroutine; an executor thread runs it to its
        end and then ends.

        Raises:
            ActionLogError: the journal could not write its queued records.
        """
        left = Deadline(wait_s).left
        if self._sub_runs is not None:
            self._sub_runs.close()
        if self._parent is not None:  # the executor, store and journal are the parent's
            self.resources.close()
            return
        loop, self._call_loop = self._call_loop, None
        if loop is not None:
            loop.drain(left())  # its calls end and are recorded first
        if self._executor is not None:
            running = self._executor.stop(left())
            self._executor = None
            if running:
                logger.warning(
                    "%d durable calls still running after %.1f s were given up; their"
                    " outcomes are not recorded",
                    running,
                    wait_s,
                )
        try:
            if wait_s is None:
                self.long_term.close()  # within its own bound
            else:
                self.long_term.close(left())
        finally:
            try:
                # Before the loop stops: an async client made on it closes on it.
                self.resources.close()
                self.event_log.metrics(self.metrics.snapshot())
                self.event_log.close()
                if self.tracer is not None:
                    self.tracer.close()
            finally:
                try:
                    if loop is not None:
                        loop.close(left())
                finally:
                    if self.journal is not None:
                        self.journal.close()

    def forget(self, key: Any) -> dict[str, int]:
        """Remove what ``key`` left outside Flink state (``ForgetKey``; the driver erases
        its state): its action-log records, its long-term memory and the knowledge items
        its runs wrote. How many of each went, by kind."""
        removed: dict[str, int] = {}
        if self.journal is not None:
            removed["action_log_records"] = self.journal.forget_key(key)
        removed.update(self.long_term.forget_key(key))
        return removed

    def sub_runs(self) -> Any:
        """The engines of the sub-agents this engine's actions run (``SubRuns``)."""
        if self._sub_runs is None:
            from flink_agents.runtime._sub_run import SubRuns  # it builds on this module

            self._sub_runs = SubRuns(self)
        return self._sub_runs

    # -- what the contexts make through ``ActionServices`` ----------------------------------

    def _writer_identity(
        self, key: Any, sequence: int, step: int, action: str, lookup: Lookup | None = None
    ) -> tuple[Any, ...]:
        """What long-term items an action writes derive their ids from: its action-log
        identity (``lookup``'s, when the journal was asked for the execution), or without
        a log this engine's id (a retry repeats it, another process does not) with the key,
        run, step and action."""
        if self.journal is not None:
            if lookup is not None:
                identity = lookup.identity
            else:
                identity = self.journal.identity(key, sequence, step, action)
            # Its fields in order, read one by one: ``dataclasses.astuple`` copies
            # recursively (``bench/RESULTS.md``).
            return (
                identity.job,
                identity.key,
                identity.run_sequence,
                identity.step,
                identity.action,
            )
        return (self._engine_id, key_text(key), sequence, step, action)

    def _new_recorder(
        self, key: Any, sequence: int, step: int, action: str, retried: bool, lookup: Lookup | None
    ) -> CallRecorder:
        """The durable-call recorder of one action execution (its recorded calls loaded
        when an earlier execution may have made some), from what the journal answered for
        it (``lookup``), asked here for a context made without asking (the plain lane).

        Raises:
            ActionLogError: the log failed.
        """
        if lookup is None:
            lookup = self.journal.lookup(key, sequence, step, action)
        return self.journal.recorder(lookup, look_up=retried)
