"""The agent and embedding model of ``test_long_term_batching.py`` (module level: Flink's
Python workers import them by name).

``TracedEmbedding`` is slow on purpose, so that batches are in flight when the job fails, and
it fails the job itself from inside a batch: at the batch whose global ordinal (over every
process and attempt) reaches a threshold, it holds the batch open, then kills its own process
(``SIGKILL``: process mode) or raises (thread mode, where the process is the MiniCluster's
JVM). Every batch leaves a ``start`` line (with its texts) and, if it returned, an ``end`` line
in a trace file, so the test can tell what was in flight when the failure came.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flink_agents.api import (
    Agent,
    BaseEmbeddingModel,
    InputEvent,
    OutputEvent,
    ResourceType,
    RunnerContext,
    action,
    resource,
)

DIMENSION = 16


class InjectedEmbeddingFailure(RuntimeError):
    """Raised from inside a batch, once per threshold, to fail the job (thread mode)."""


def append_line(path: str, record: dict[str, Any]) -> None:
    """One small ``O_APPEND`` write: lines of several processes never interleave."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, (json.dumps(record) + "\n").encode())
    finally:
        os.close(descriptor)


def read_trace(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


class TracedEmbedding(BaseEmbeddingModel):
    """A hashing embedder (the test reads items back by id and value, never by meaning) that
    takes ``delay_s`` per batch, traces each batch and fails once per ``fail_at_batches``.

    Args:
        trace: the trace file (empty: no trace, no failure; for reading the store back).
        delay_s: the time each batch takes.
        fail_at_batches: global batch ordinals (1-based) at which to fail, once each.
        failure: ``"kill"`` (SIGKILL of this process) or ``"raise"``.
        min_keys: fail only in a batch holding items of at least this many keys (a text's
            key is its first word), so the failure hits a batch shared across keys.
        hold_s: how long the failing batch stays open first (longer than the action log's
            20 ms batches, so an action wrongly counted complete would be on record).
    """

    def __init__(
        self,
        trace: str = "",
        delay_s: float = 0.0,
        fail_at_batches: Sequence[int] = (),
        failure: str = "kill",
        min_keys: int = 2,
        hold_s: float = 0.3,
    ) -> None:
        self.trace = trace
        self.delay_s = delay_s
        self.fail_at_batches = list(fail_at_batches)
        self.failure = failure
        self.min_keys = min_keys
        self.hold_s = hold_s

    @property
    def model_id(self) -> str:
        return f"test:hashing-{DIMENSION}"

    @property
    def dimension(self) -> int:
        return DIMENSION

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        texts = list(texts)
        if not self.trace or not texts:
            return [_vector(text) for text in texts]
        batch = uuid.uuid4().hex
        append_line(
            self.trace,
            {
                "event": "start",
                "batch": batch,
                "pid": os.getpid(),
                "thread": threading.current_thread().name,
                "t": time.time(),
                "texts": texts,
            },
        )
        self._maybe_fail(batch, texts)
        time.sleep(self.delay_s)
        vectors = [_vector(text) for text in texts]
        append_line(self.trace, {"event": "end", "batch": batch, "t": time.time()})
        return vectors

    def _maybe_fail(self, batch: str, texts: list[str]) -> None:
        """Fail inside this batch if the batches started so far reached a threshold not yet
        used (a marker file per threshold, shared by every process and attempt) and the
        batch holds items of ``min_keys`` keys."""
        if not self.fail_at_batches or len({key_of(text) for text in texts}) < self.min_keys:
            return
        started = sum(1 for line in read_trace(Path(self.trace)) if line["event"] == "start")
        for threshold in self.fail_at_batches:
            if started < threshold:
                continue
            marker = Path(self.trace).with_name(f"failed-at-batch-{threshold}")
            try:
                marker.touch(exist_ok=False)
            except FileExistsError:
                continue
            time.sleep(self.hold_s)  # the batch stays open; other keys and batches go on
            append_line(self.trace, {"event": "fail", "batch": batch, "t": time.time()})
            if self.failure == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise InjectedEmbeddingFailure(f"injected failure in batch {started}")


def _vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    raw = [digest[i] - 127.5 for i in range(DIMENSION)]
    norm = math.sqrt(sum(v * v for v in raw))
    return [v / norm for v in raw]


def note(record: dict[str, Any], position: int) -> str:
    return f"{record['user']} note {record['id']}.{position}"


def fact(record: dict[str, Any]) -> str:
    return f"{record['user']} fact {record['id']}"


def key_of(text: str) -> str:
    """The key whose action added ``text`` (a ``note`` or a ``fact``)."""
    return text.split(" ", 1)[0]


def record_of(text: str) -> int:
    """The id of the record whose action added ``text``."""
    return int(text.split(" ")[2].split(".")[0])


class NotesAgent(Agent):
    """Each record adds ``items`` notes to its key's ``notes`` memory set and, if it has
    ``fact``, one item to the shared ``facts`` knowledge set; the output carries the ids."""

    @resource(ResourceType.EMBEDDING_MODEL)
    @staticmethod
    def embedder(**args: Any) -> TracedEmbedding:
        return TracedEmbedding(**args)

    @action(InputEvent)
    @staticmethod
    def remember(event: InputEvent, ctx: RunnerContext) -> None:
        record = event.input
        notes = ctx.long_term_memory.create_memory_set("notes", str)
        ids = notes.add(items=[note(record, j) for j in range(record["items"])])
        fact_ids = []
        if record.get("fact"):
            fact_ids = ctx.knowledge.create_knowledge_set("facts").add(fact(record))
        ctx.send_event(
            OutputEvent(
                output={"id": record["id"], "user": record["user"], "ids": ids, "facts": fact_ids}
            )
        )
