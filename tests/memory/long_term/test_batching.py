"""Batched embedding (issue 16): texts of many adds share model calls, off the adding
thread; a key reads its own writes; an action completes only once its items are stored,
and an item that cannot be embedded fails the action that added it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import wait
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from flink_agents.api import (
    Agent,
    BaseEmbeddingModel,
    EmbeddingError,
    Event,
    InputEvent,
    OutputEvent,
    ResourceType,
    action,
    resource,
)
from flink_agents.integrations.embeddings import LocalEmbeddingModel
from flink_agents.integrations.vector_stores import open_vector_store
from flink_agents.memory.long_term import VectorLongTermMemory
from flink_agents.memory.long_term._batcher import EmbeddingBatcher
from flink_agents.runtime import AgentOptions, LocalRunner

MODEL = LocalEmbeddingModel()


class RecordingModel(BaseEmbeddingModel):
    """The offline model, recording each call's batch size, optionally slow or failing."""

    def __init__(self, delay: float = 0.0, fail_on: str | None = None) -> None:
        self.delay = delay
        self.fail_on = fail_on
        self.batches: list[int] = []
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return MODEL.model_id

    @property
    def dimension(self) -> int:
        return MODEL.dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        with self._lock:
            self.batches.append(len(texts))
        time.sleep(self.delay)
        if self.fail_on is not None and any(self.fail_on in text for text in texts):
            raise EmbeddingError(f"the endpoint refused a text containing {self.fail_on!r}")
        return MODEL.embed(texts)

    def embed_one(self, text: str) -> list[float]:  # a query: not recorded
        return MODEL.embed_one(text)


def sentences(count: int) -> list[str]:
    return [f"Customer {n} asked about parcel {n * 7} on day {n % 28 + 1}." for n in range(count)]


# -- the batcher ---------------------------------------------------------------------------


def test_texts_from_many_threads_share_model_calls_and_keep_their_order():
    model = RecordingModel(delay=0.02)
    batcher = EmbeddingBatcher(model, max_batch=32, max_delay=0.005)
    texts = sentences(160)
    futures: dict[int, Any] = {}

    def submit(start: int) -> None:
        for n in range(start, start + 20):
            futures[n] = batcher.submit([texts[n]])

    threads = [threading.Thread(target=submit, args=(start,)) for start in range(0, 160, 20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wait(list(futures.values()))
    batcher.close()
    assert sum(model.batches) == 160
    assert len(model.batches) < 40  # 160 texts, one at a time, would be 160 calls
    assert max(model.batches) <= 32
    expected = MODEL.embed(texts)
    for n, future in futures.items():
        [vector] = future.result()
        assert np.dot(vector, expected[n]) > 0.9999  # its own text's vector, not a neighbour's


def test_a_lone_text_waits_no_longer_than_the_delay_and_a_large_request_is_one_call():
    model = RecordingModel()
    batcher = EmbeddingBatcher(model, max_batch=8, max_delay=0.005)
    try:
        assert len(batcher.submit(["alone"]).result(timeout=30)) == 1
        assert len(batcher.submit(sentences(20)).result(timeout=30)) == 20
        assert batcher.submit([]).result() == []
    finally:
        batcher.close()
    assert model.batches == [1, 20]


def test_a_failed_batch_fails_each_of_its_requests_and_the_next_batch_works():
    model = RecordingModel(delay=0.05, fail_on="poison")
    batcher = EmbeddingBatcher(model, max_batch=64, max_delay=0.02)
    try:
        good, bad = batcher.submit(["fine text"]), batcher.submit(["poison pill"])
        for future in (good, bad):  # one batch: both fail with the model's error
            with pytest.raises(EmbeddingError, match="poison"):
                future.result(timeout=30)
        assert len(batcher.submit(["fine again"]).result(timeout=30)) == 1
    finally:
        batcher.close()


def test_a_failing_callback_spoils_no_other_request_of_its_batch(caplog):
    """``then`` callbacks run on the batcher's thread: one that raises is logged, and the
    other requests of its batch still get their vectors."""
    batcher = EmbeddingBatcher(RecordingModel(), max_batch=64, max_delay=0.05)
    told: list[tuple[int, int | None, BaseException | None]] = []

    def done(n: int):
        def callback(vectors, error):
            told.append((n, None if vectors is None else len(vectors), error))
            if n == 0:
                raise RuntimeError("the requester's own bug")

        return callback

    try:
        for n in range(3):
            batcher.then([f"text {n}"], done(n))
        batcher.then([], done(9))  # nothing to embed: told at once
        assert told == [(9, 0, None)]
    finally:
        batcher.close()
    assert sorted(told) == [(0, 1, None), (1, 1, None), (2, 1, None), (9, 0, None)]
    assert "callback failed" in caplog.text


def test_close_embeds_everything_submitted_before_it():
    model = RecordingModel(delay=0.05)
    batcher = EmbeddingBatcher(model, max_batch=4, max_delay=0.001, concurrency=1)
    futures = [batcher.submit([text]) for text in sentences(12)]
    batcher.close()
    assert all(f.done() and f.exception() is None for f in futures)
    with pytest.raises(RuntimeError, match="closed"):
        batcher.submit(["late"])


EXITING = """
import atexit
from concurrent.futures import wait

from flink_agents.memory.long_term._batcher import EmbeddingBatcher


class Model:
    def embed(self, texts):
        return [[float(len(text))] for text in texts]


batcher = EmbeddingBatcher(Model(), max_delay=0.001)
assert batcher.submit(["a warm pool"]).result(10) == [[11.0]]


def close_at_exit():  # as the dispatcher's finalizer does when a Python worker exits
    future = batcher.submit(["late", "items"])
    landed = not wait([future], timeout=5).not_done and future.result() == [[4.0], [5.0]]
    batcher.close(5)
    print("embedded" if landed else "never embedded", flush=True)


atexit.register(close_at_exit)
"""


def test_a_batcher_closed_as_its_interpreter_exits_embeds_what_it_is_given():
    """A Python worker that exits (a failed job's, in process mode) closes its dispatcher
    from a finalizer, after the interpreter's thread pools stopped taking work: the batcher
    embeds on its own thread then, so the writes the close waits for land (they never did,
    and the worker held its vector store for minutes while the job's next attempt waited)."""
    child = subprocess.run(
        [sys.executable, "-c", EXITING], capture_output=True, text=True, timeout=60
    )
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.strip() == "embedded", child.stderr[-2000:]


# -- long-term memory with a batcher ---------------------------------------------------------


@pytest.fixture
def slow_memory(tmp_path: Path):
    store = open_vector_store(tmp_path / "vectors")
    model = RecordingModel(delay=0.1)
    batcher = EmbeddingBatcher(model)
    memory = VectorLongTermMemory(store, model, batcher=batcher)
    yield memory, model
    memory.close()
    batcher.close()
    store.close()


def test_an_add_refused_by_a_closed_batcher_leaves_no_write_to_wait_for(tmp_path: Path):
    """An add after the batcher closed raises; the key's reads do not wait for it forever."""
    store = open_vector_store(tmp_path / "vectors")
    batcher = EmbeddingBatcher(RecordingModel())
    memory = VectorLongTermMemory(store, MODEL, batcher=batcher)
    try:
        notes = memory.for_key("ana").create_memory_set("notes", str)
        batcher.close()
        with pytest.raises(RuntimeError, match="closed"):
            notes.add("too late")
        assert memory.wait_for_writes(10)
        assert notes.size() == 0
    finally:
        memory.close()
        store.close()


def test_a_key_reads_its_own_writes_at_once(slow_memory):
    memory, _ = slow_memory
    notes = memory.for_key("ana").create_memory_set("notes", str)
    started = time.monotonic()
    notes.add("I keep bees on the roof.")
    notes.add(items=["My bike is green.", "I was born in Porto."])
    assert time.monotonic() - started < 0.1  # add did not wait for the (0.1 s) model
    assert notes.size() == 3  # ...but reads do wait for the key's writes
    assert [i.item for i in notes.get_recent(3)] == [
        "I keep bees on the roof.",
        "My bike is green.",
        "I was born in Porto.",
    ]
    assert notes.search("Where is her hometown?", limit=1)[0].item == "I was born in Porto."


def test_a_delete_after_an_add_is_not_undone_by_the_add_landing(slow_memory):
    memory, _ = slow_memory
    notes = memory.for_key("bo").create_memory_set("notes", str)
    notes.add("soon gone")
    notes.delete()
    memory.wait_for_writes(30)
    assert notes.size() == 0
    notes.add("kept")
    assert memory.for_key("bo").delete_memory_set("notes")
    memory.wait_for_writes(30)
    assert memory.core.stored_count("bo", "notes") == 0


def test_capacity_is_enforced_after_batched_adds(slow_memory):
    memory, _ = slow_memory
    log = memory.for_key("cy").create_memory_set("log", str, capacity=3)
    for text in sentences(6):
        log.add(text)
    memory.wait_for_writes(30)
    assert memory.wait_for_compaction(60)
    assert log.size() <= 3


# -- through the runtime ---------------------------------------------------------------------


class Noted(Event):
    text: str


class NoteAgent(Agent):
    """Adds the input's note, then (next action, same run) searches for it; writes a
    short-term counter in the adding action so a failed add shows nothing was applied."""

    @resource(ResourceType.EMBEDDING_MODEL)
    @staticmethod
    def embedder(delay: float = 0.05, fail_on: str | None = None) -> BaseEmbeddingModel:
        return RecordingModel(delay=delay, fail_on=fail_on)

    @action(InputEvent)
    @staticmethod
    def remember(event: InputEvent, ctx: Any) -> None:
        ctx.short_term_memory.set("adds", (ctx.short_term_memory.get("adds") or 0) + 1)
        ctx.long_term_memory.create_memory_set("notes", str).add(event.input["note"])
        ctx.send_event(Noted(text=event.input["note"]))

    @action(Noted)
    @staticmethod
    def recall(event: Noted, ctx: Any) -> None:
        notes = ctx.long_term_memory.get_memory_set("notes")
        found = notes.search(event.text, limit=1)
        ctx.send_event(OutputEvent(output={"found": found[0].item, "size": notes.size()}))


def runner(tmp_path: Path, **options: Any) -> LocalRunner:
    return LocalRunner(
        NoteAgent,
        options=AgentOptions(
            data_dir=str(tmp_path),
            long_term_memory_embedding="embedder",
            error_policy="error-output",
            **options,
        ),
    )


def test_the_next_action_of_the_run_finds_the_item_and_keys_overlap(tmp_path):
    local = runner(tmp_path)
    try:
        outputs = []
        for n, text in enumerate(sentences(12)):
            outputs += local.feed(f"user-{n % 4}", {"note": text})
        outputs += local.finish()
        model = local.engine.long_term._memory.core.embedding
    finally:
        local.engine.close()
    assert sorted(o["found"] for o in outputs) == sorted(sentences(12))
    assert sorted(o["size"] for o in outputs) == [1] * 4 + [2] * 4 + [3] * 4
    assert sum(model.batches) == 12
    assert len(model.batches) < 12  # other keys' adds joined a parked key's batch


def test_an_item_that_cannot_be_embedded_fails_the_action_that_added_it(tmp_path):
    local = runner(tmp_path)
    try:
        outputs = local.run("ana", {"note": "fine"})
        _poison(local)
        outputs += local.run("ana", {"note": "poison"})
        outputs += local.finish()
        errors = local.errors
        short_term = local.short_term_memory("ana")
    finally:
        local.engine.close()
    assert [o["found"] for o in outputs] == ["fine"]
    [error] = errors
    assert error["action"] == "remember"
    assert "poison" in error["error"]
    assert short_term["adds"] == 1  # the failed action's counter was not applied


def _poison(local: LocalRunner) -> None:
    """Make the runner's embedding model refuse texts containing 'poison' from now on."""
    local.engine.long_term._memory.core.embedding.fail_on = "poison"


def test_runs_waiting_for_their_items_are_bounded_apart_from_durable_calls(tmp_path):
    """max-in-flight (1 here) bounds durable calls; runs parked until their items are stored
    have their own bound, so the adds of many keys still share a batch."""
    local = runner(tmp_path, max_in_flight=1)
    try:
        outputs = []
        for n, text in enumerate(sentences(8)):
            outputs += local.feed(f"user-{n}", {"note": text})
        outputs += local.finish()
        model = local.engine.long_term._memory.core.embedding
    finally:
        local.engine.close()
    assert sorted(o["found"] for o in outputs) == sorted(sentences(8))
    assert sum(model.batches) == 8
    assert len(model.batches) <= 3  # with one run at a time it would be 8 calls of one text


def test_a_bound_of_one_storing_run_embeds_one_add_at_a_time(tmp_path):
    """The bound holds: past it, the operator waits for a store before the next record."""
    local = runner(tmp_path, long_term_memory_max_storing=1)
    try:
        for n, text in enumerate(sentences(4)):
            local.feed(f"user-{n}", {"note": text})
        local.finish()
        model = local.engine.long_term._memory.core.embedding
    finally:
        local.engine.close()
    assert model.batches == [1, 1, 1, 1]
