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
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor

from flink_agents.api._embedding import BaseEmbeddingModel

Vectors = list[list[float]]


class _Request:
    __slots__ = ("future", "texts")

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.future: Future[Vectors] = Future()


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
        request = _Request(list(texts))
        if not request.texts:
            request.future.set_result([])
            return request.future
        with self._close_lock:
            if self._closed:
                raise RuntimeError("the embedding batcher is closed")
            self._requests.put(request)
        return request.future

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
            self._pool.submit(self._embed, batch)
        self._pool.shutdown(wait=True)  # what was submitted is embedded before close returns

    def _embed(self, batch: list[_Request]) -> None:
        try:
            texts = [text for request in batch for text in request.texts]
            try:
                vectors = self.model.embed(texts)
            except BaseException as error:
                for request in batch:
                    with contextlib.suppress(InvalidStateError):
                        request.future.set_exception(error)
                return
            start = 0
            for request in batch:
                end = start + len(request.texts)
                request.future.set_result(vectors[start:end])
                start = end
        finally:
            self._slots.release()
