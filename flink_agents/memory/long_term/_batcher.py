"""Embedding in shared batches, off the threads that add items.

An embedding model answers a batch of texts in about the time it takes for one (a remote
endpoint's round trip; the local model's fixed cost per call), so texts added by many
actions and keys are gathered and embedded together. A batch closes when it holds
``max_batch`` texts or ``max_delay`` seconds after its first text arrived, whichever comes
first; while ``concurrency`` batches are being embedded, new texts wait and gather, so
batches grow with the load and a lone text waits at most ``max_delay``.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor

from flink_agents.api import BaseEmbeddingModel

logger = logging.getLogger(__name__)

Vectors = list[list[float]]
Embedded = Callable[[Vectors | None, BaseException | None], None]
"""Told a request's outcome on the batcher's thread: its vectors, or the model's error."""


class _Request:
    __slots__ = ("done", "texts")

    def __init__(self, texts: list[str], done: Embedded) -> None:
        self.texts = texts
        self.done = done


_STOP = object()


class EmbeddingBatcher:
    """Embeds the texts of many ``submit`` calls in shared batches (see the module docstring).

    Args:
        model: the embedding model (its ``embed`` is called with whole batches).
        max_batch: texts per batch at most (a request larger than that is one batch).
        max_delay: seconds a batch waits for more texts after its first one.
        concurrency: batches embedded at the same time (threads of its own).
    """

    def __init__(
        self,
        model: BaseEmbeddingModel,
        *,
        max_batch: int = 128,
        max_delay: float = 0.005,
        concurrency: int = 2,
    ) -> None:
        if max_batch < 1 or max_delay < 0 or concurrency < 1:
            raise ValueError("max_batch and concurrency must be >= 1, max_delay >= 0")
        self.model = model
        self.max_batch = max_batch
        self.max_delay = max_delay
        self._requests: queue.SimpleQueue[_Request | object] = queue.SimpleQueue()
        self._slots = threading.Semaphore(concurrency)
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="flink-agents-embedding")
        self._closed = False
        self._close_lock = threading.Lock()
        self._collector = threading.Thread(
            target=self._collect, name="flink-agents-embedding-batches", daemon=True
        )
        self._collector.start()

    def submit(self, texts: Sequence[str]) -> Future[Vectors]:
        """A future of the vectors of ``texts``, in order (failing with the model's error)."""
        future: Future[Vectors] = Future()

        def done(vectors: Vectors | None, error: BaseException | None) -> None:
            with contextlib.suppress(InvalidStateError):
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(vectors)

        self.then(texts, done)
        return future

    def then(self, texts: Sequence[str], done: Embedded) -> None:
        """Embed ``texts`` in a batch, then call ``done(vectors, None)`` (in order of
        ``texts``) or ``done(None, error)`` on the batcher's thread; ``done`` must not wait
        for other embeddings. Cheaper than ``submit`` (no future: one is made per added
        item otherwise). Empty ``texts`` are done at once, on this thread."""
        request = _Request(list(texts), done)
        if not request.texts:
            done([], None)
            return
        with self._close_lock:
            if self._closed:
                raise RuntimeError("the embedding batcher is closed")
            self._requests.put(request)

    def close(self, timeout: float | None = 60.0) -> None:
        """Embed what was submitted, then stop (waits up to ``timeout`` seconds)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            self._requests.put(_STOP)
        self._collector.join(timeout)

    def _collect(self) -> None:
        stopping = False
        while not stopping:
            self._slots.acquire()  # texts gather in the queue while every slot is busy
            first = self._requests.get()
            if first is _STOP:
                self._slots.release()
                break
            batch = [first]
            size = len(first.texts)
            deadline = time.monotonic() + self.max_delay
            while size < self.max_batch:
                try:
                    more = self._requests.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if more is _STOP:
                    stopping = True
                    break
                batch.append(more)
                size += len(more.texts)
            try:
                self._pool.submit(self._embed, batch)
            except RuntimeError:
                # The interpreter is exiting: its thread pools take no more work once their
                # exit hook has run, before the finalizers that close this batcher. Embedded
                # here, the batch's items still land, and the writes a close waits for end.
                self._embed(batch)
        self._pool.shutdown(wait=True)  # what was submitted is embedded before close returns

    def _embed(self, batch: list[_Request]) -> None:
        try:
            texts = [text for request in batch for text in request.texts]
            try:
                vectors = self.model.embed(texts)
            except BaseException as error:
                for request in batch:
                    self._tell(request, None, error)
                return
            start = 0
            for request in batch:
                end = start + len(request.texts)
                self._tell(request, vectors[start:end], None)
                start = end
        finally:
            self._slots.release()

    @staticmethod
    def _tell(request: _Request, vectors: Vectors | None, error: BaseException | None) -> None:
        try:
            request.done(vectors, error)
        except Exception:  # the requester's own failure: the batch's other requests go on
            logger.exception("an embedded batch's callback failed")
