"""A persistent MCP client session on a private event loop, called from any thread.

The ``mcp`` SDK is asyncio-based and its transports (a stdio subprocess, a streamable HTTP
connection) live in anyio task groups that must be entered and left by one task. Actions
call tools synchronously from their own threads (the runner's executor, Flink's operator
thread) or await them from another event loop (the runner's loop of ``async def`` calls),
so each server resource owns a daemon thread running an event loop: one task on it holds
the client open (``Session._hold``) until the session is closed or the connection ends, and
every request is a task of its own on the same loop, submitted with
``asyncio.run_coroutine_threadsafe`` and waited for with a timeout by the calling thread
(``LoopThread.run``) or awaited by the calling loop (``LoopThread.arun``).

A request races the end of the connection: when the server dies, the holder task ends (the
transport's task group fails or the stream closes) and every request in flight fails at
once with ``SessionEnded`` instead of waiting for an answer that will never come.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

import anyio

T = TypeVar("T")

_SETTLE_S = 5.0
"""How long the calling thread waits past a request's own timeout for the loop to answer
(the loop enforces the timeout; this only guards against a loop that stopped)."""


class SessionEnded(Exception):
    """The connection ended (the server exited or became unreachable) before the answer.

    Attributes:
        cause: why the holder task ended, when it ended with an error.
    """

    def __init__(self, cause: BaseException | None) -> None:
        super().__init__(describe(cause) if cause is not None else "the connection closed")
        self.cause = cause


class LoopThread:
    """A private asyncio event loop on a daemon thread (daemon: a process that never closes
    its resources still exits)."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coroutine`` on the loop and wait for its result on this thread.

        Raises:
            TimeoutError: no result within ``timeout`` seconds (the coroutine is cancelled).
        """
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout:g}s") from None

    async def arun(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        """``run`` for a caller on another event loop: awaits the result there instead of
        blocking a thread (cancelling the await cancels the coroutine on this loop).

        Raises:
            TimeoutError: no result within ``timeout`` seconds (the coroutine is cancelled).
        """
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        except TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout:g}s") from None

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop after the tasks still on it are cancelled, and close it."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                gather = asyncio.gather(*pending, return_exceptions=True)
                self.loop.run_until_complete(gather)
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()


class Session:
    """One connection to a server: opened by ``open``, ended by ``close`` or by the server.

    Args:
        connect: makes the async context manager that connects and yields the ``mcp`` client
            (entered and left by the holder task).
    """

    def __init__(self, connect: Callable[[], AbstractAsyncContextManager[Any]]) -> None:
        self._connect = connect
        self.client: Any = None
        self.failure: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._ended: asyncio.Event | None = None
        self._holder: asyncio.Task[None] | None = None
        self._scope: anyio.CancelScope | None = None

    @property
    def ended(self) -> bool:
        return self._ended is not None and self._ended.is_set()

    async def open(self) -> None:
        """Connect (on the loop); returns once the client is ready.

        Raises:
            SessionEnded: the connection could not be made.
        """
        self._stop, self._ended = asyncio.Event(), asyncio.Event()
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._holder = asyncio.create_task(self._hold(ready), name="mcp-session")
        try:
            await ready
        except asyncio.CancelledError:  # the caller gave up (connect timeout): so do we
            self._abort()
            raise

    async def request(self, call: Callable[[Any], Awaitable[T]], timeout: float) -> T:
        """``call(client)``, unless the connection ends first or ``timeout`` passes.

        Raises:
            SessionEnded: the connection ended before the answer.
            TimeoutError: no answer within ``timeout`` seconds.
        """
        assert self._ended is not None, "open the session first"
        if self._ended.is_set():
            raise SessionEnded(self.failure)
        answer = asyncio.ensure_future(call(self.client))
        ended = asyncio.ensure_future(self._ended.wait())
        try:
            done, _ = await asyncio.wait(
                {answer, ended}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            ended.cancel()
        if answer in done:
            return answer.result()
        answer.cancel()
        if ended in done:
            raise SessionEnded(self.failure)
        raise TimeoutError(f"no answer within {timeout:g}s")

    async def close(self, timeout: float) -> None:
        """Leave the client (which ends a stdio server's process) within ``timeout``."""
        if self._holder is None or self._stop is None:
            return
        self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._holder), timeout)
        except BaseException:  # a transport that fails on the way out, or a slow one
            self._abort()

    def _abort(self) -> None:
        """Cancel the holder through its anyio cancel scope, not ``Task.cancel``: the SDK's
        transports shield their shutdown (a stdio server is stopped, then killed) from
        anyio cancellation only."""
        if self._scope is not None:
            self._scope.cancel()
        elif self._holder is not None:
            self._holder.cancel()

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        assert self._stop is not None and self._ended is not None
        try:
            with anyio.CancelScope() as self._scope:
                async with self._connect() as client:
                    self.client = client
                    ready.set_result(None)
                    await self._stop.wait()
        except BaseException as error:  # a failed transport's task group, a cancellation
            self.failure = error
            if not ready.done():
                ready.set_exception(SessionEnded(error))
        finally:
            self.client = None
            self._ended.set()
            if not ready.done():  # left without an error before it was ready
                ready.set_exception(SessionEnded(None))


def describe(error: BaseException) -> str:
    """``Type: message`` of the error that matters: the first leaf of exception groups, the
    cause of a bare cancellation."""
    seen: set[int] = set()
    while id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, BaseExceptionGroup) and error.exceptions:
            error = error.exceptions[0]
        elif isinstance(error, SessionEnded) and error.cause is not None:
            error = error.cause
        elif isinstance(error, asyncio.CancelledError) and (error.__cause__ or error.__context__):
            error = error.__cause__ or error.__context__  # type: ignore[assignment]
        else:
            break
    if isinstance(error, asyncio.CancelledError):
        return "the connection was cancelled"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
