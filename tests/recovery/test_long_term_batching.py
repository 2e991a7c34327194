"""Exactly-once long-term items with batched embedding: a job fails while batches are in
flight, Flink restores its last checkpoint and the source replays, and every key ends with
exactly the items its records added, each once, as does the shared knowledge set.

Items added by actions are embedded in shared batches on background threads, and an action
counts as complete (in the action log, in Flink state) only once its items are stored. The
embedding model (``TracedEmbedding``) takes a while per batch and fails the job from inside
one that holds items of several keys: it keeps that batch open longer than the action log
takes to write a record, then kills its own Python worker with SIGKILL (process mode, with
real worker processes; the worker may be the one hosting the machine's shared store) or
raises (thread mode, where the worker is the MiniCluster's JVM). The actions whose items were
in that batch must not be on record when the failure comes; if they were (the barrier
broken), a restore would skip them and their items would be lost. Actions whose items had
landed but that were not on record or not in the checkpoint run again and must overwrite
their items (their ids derive from the action's identity), not add copies: with
``action-log: none`` every replayed action does.

Items are checked by value and id against the records and against the job's outputs (an
exactly-once file sink): each key's set holds exactly its records' notes, once each, under the
ids the committed outputs report. The trace of batches shows that the failures came inside
batches shared by several keys, on the batcher's threads, and that no batch ever held items of
two records of one key (a key's next run waited for its previous items to be stored). With the
barrier broken (actions completing before their items are stored) every case fails on that
last check and items are lost; with batching off the failure never comes.

The input is paced as in ``test_minicluster_failure.py``: in process mode a run parked at the
checkpoint (here, an action waiting for its items) resumes on its key's next record, since
PyFlink restores no timer of a Python operator there.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents._ids import key_text
from flink_agents.integrations.vector_stores import open_vector_store, point_id
from flink_agents.memory.long_term import VectorKnowledge, VectorLongTermMemory
from flink_agents.plan import to_plan
from flink_agents.runtime.flink import JobPaths, build_agent_job, read_json_files
from tests.recovery.checkpoints import bounded_checkpoints, execute
from tests.recovery.long_term_agents import (
    NotesAgent,
    TracedEmbedding,
    fact,
    key_of,
    note,
    read_trace,
    record_of,
)

pytestmark = [pytest.mark.slow, pytest.mark.flink]

USERS = 8
RECORDS = [
    {"id": i, "user": f"u{i % USERS}", "items": 1 + i % 2, "fact": i % 5 == 0} for i in range(240)
]
FAIL_AT_BATCHES = [10, 26]  # global batch ordinals: a job makes 30 or more (30 records per key)
DELAY_S = 0.04  # per batch: while two batches embed, the next one gathers several records
PAD = 1000  # bytes per input line in process mode: a few lines fill a 4 KiB network buffer
JOB = "long-term-batching"
"""The job's name, pinned without an action log (where item ids derive from it, the key, run,
step and action) so that a failure message can tell which run wrote each copy of an item."""
PACING = {  # as test_minicluster_failure.py, for the same reason
    "taskmanager.memory.segment-size": "4kb",
    "python.fn-execution.bundle.size": "20",
    "python.fn-execution.bundle.time": "100",
}


def run_job(tmp_path: Path, mode: str, action_log: str | None) -> list[dict[str, Any]]:
    """Run the failing job; returns its (exactly-once) outputs."""
    data = tmp_path / "input.jsonl"
    pad = "x" * (PAD if mode == "process" else 0)
    data.write_text("".join(json.dumps({**r, "pad": pad}) + "\n" for r in RECORDS))
    embedder = {
        "trace": str(tmp_path / "trace.jsonl"),
        "delay_s": DELAY_S,
        "fail_at_batches": FAIL_AT_BATCHES,
        "failure": "kill" if mode == "process" else "raise",
    }
    plan = to_plan(NotesAgent)
    plan = plan.model_copy(
        update={"resources": tuple(r.model_copy(update={"args": embedder}) for r in plan.resources)}
    )
    config = bounded_checkpoints()
    config.set_string("restart-strategy.type", "fixed-delay")
    config.set_string("restart-strategy.fixed-delay.attempts", str(len(FAIL_AT_BATCHES) + 1))
    config.set_string("restart-strategy.fixed-delay.delay", "100 ms")
    config.set_string("python.execution-mode", mode)
    if mode == "process":
        for name, value in PACING.items():
            config.set_string(name, value)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(2)
    out = tmp_path / "out"
    options: dict[str, Any] = {
        "data_dir": str(tmp_path / "data"),  # the SQLite action log and the vector store
        "long_term_memory_embedding": "embedder",
    }
    if action_log is not None:
        options["action_log"] = action_log
    if action_log == "none":
        options["action_log_job"] = JOB
    build_agent_job(
        env,
        plan,
        JobPaths(data, out / "outputs", out / "errors", None),
        "user",
        checkpoint_interval_ms=500,
        **options,
    )
    execute(env, "long-term-batching")
    assert read_json_files(out / "errors") == []
    return read_json_files(out / "outputs")


def read_store(directory: Path) -> tuple[dict[str, list[tuple[str, str]]], list[tuple[str, str]]]:
    """Each user's notes and the facts, as (id, value) pairs."""
    with open_vector_store(str(directory)) as store:
        embedding = TracedEmbedding()  # no trace: the same vectors, no failure
        memory = VectorLongTermMemory(store, embedding)
        try:
            notes = {
                f"u{u}": [
                    (item.id, item.item)
                    for item in memory.for_key(f"u{u}").get_memory_set("notes").get()
                ]
                for u in range(USERS)
            }
        finally:
            memory.close()
        facts = VectorKnowledge(store, embedding).get_knowledge_set("facts").get()
        return notes, [(item.id, item.value) for item in facts]


def origins(items: list[tuple[str, str]], counted: Counter[str]) -> str:
    """For a failure message: each value ``items`` hold more often than ``counted`` says,
    with the run and step its copies' ids were minted for (without an action log, where
    they derive from ``JOB``, the key, run, step and action)."""
    held = Counter(value for _, value in items)
    lines = []
    for value in sorted(held - counted):
        user = key_of(value)
        scope, name = ("knowledge", "facts") if " fact " in value else ("ltm", "notes")
        known = {
            point_id(JOB, key_text(user), run, step, "remember", scope, name, n): (run, step, n)
            for run in range(1, 2 + len(RECORDS) // USERS)
            for step in range(1, 4)
            for n in range(2)
        }
        copies = [f"{i} (run, step, item: {known.get(i)})" for i, v in items if v == value]
        lines.append(f"{value!r} {held[value]} times: {', '.join(copies)}")
    return "; ".join(lines)


def failed_batches(trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``start`` lines of the batches the job failed in."""
    failed = {line["batch"] for line in trace if line["event"] == "fail"}
    return [line for line in trace if line["event"] == "start" and line["batch"] in failed]


def completed_texts(trace: list[dict[str, Any]]) -> Counter[str]:
    """How many times each text was embedded by a batch that returned (and so stored)."""
    ended = {line["batch"] for line in trace if line["event"] == "end"}
    return Counter(
        text
        for line in trace
        if line["event"] == "start" and line["batch"] in ended
        for text in line["texts"]
    )


CASES = [
    pytest.param("process", None, id="process-sqlite-log"),
    pytest.param("thread", None, id="thread-sqlite-log"),
    pytest.param("thread", "none", id="thread-no-log"),
]


@pytest.mark.parametrize(("mode", "action_log"), CASES)
def test_items_exactly_once_after_failures_mid_batch(tmp_path, monkeypatch, mode, action_log):
    if mode == "process":
        # Real worker processes, not PyFlink's default for MiniCluster (loopback: the
        # "workers" are threads of this process, which the kill would take down).
        monkeypatch.setenv("_python_worker_execution_mode", "process")
    outputs = run_job(tmp_path, mode, action_log)
    trace = read_trace(tmp_path / "trace.jsonl")

    # The failures came from inside batches shared by several keys, on the batcher's
    # threads, and those batches never returned.
    failed = failed_batches(trace)
    assert failed, "the job never failed"
    ended = {line["batch"] for line in trace if line["event"] == "end"}
    for batch in failed:
        assert batch["batch"] not in ended
        assert batch["thread"].startswith("flink-agents-embedding"), batch["thread"]
        assert len({key_of(text) for text in batch["texts"]}) >= 2, batch["texts"]
    # A key's runs are sequential and a run completes only once its items are stored, so no
    # batch holds items of two records of one key (it would if actions completed earlier).
    for line in trace:
        if line["event"] == "start":
            records = {(key_of(text), record_of(text)) for text in line["texts"]}
            keys = [key for key, _ in records]
            assert len(keys) == len(set(keys)), f"a key's next run went ahead: {line['texts']}"

    # Outputs exactly once, and each reports the ids its items are stored under.
    assert sorted(o["id"] for o in outputs) == [r["id"] for r in RECORDS]
    notes, facts = read_store(tmp_path / "data" / "vector-store")
    for user, items in notes.items():
        mine = [r for r in RECORDS if r["user"] == user]
        expected = sorted(note(r, j) for r in mine for j in range(r["items"]))
        values = sorted(value for _, value in items)
        assert Counter(values) == Counter(expected), (
            f"{user}: lost or duplicated notes; {origins(items, Counter(expected))}"
        )
        ids = [item_id for item_id, _ in items]
        assert len(set(ids)) == len(ids)
        reported = {i for o in outputs if o["user"] == user for i in o["ids"]}
        assert set(ids) == reported, user
    expected_facts = sorted(fact(r) for r in RECORDS if r["fact"])
    assert sorted(value for _, value in facts) == expected_facts, origins(
        facts, Counter(expected_facts)
    )
    assert {i for i, _ in facts} == {i for o in outputs for i in o["facts"]}

    # What the failures cut off was embedded again; what had landed and ran again was
    # stored again under the same ids (the counts above stayed exact).
    stored = completed_texts(trace)
    for batch in failed:
        assert all(stored[text] for text in batch["texts"]), batch["texts"]
    rewritten = [text for text, count in stored.items() if count > 1]
    print(f"{mode}/{action_log or 'sqlite'}: {len(rewritten)} items stored twice, kept once")
    assert len(failed) == len(FAIL_AT_BATCHES), failed
    if action_log == "none":  # every action replayed after the checkpoint ran again
        assert rewritten, "no item was written twice: the overwrite was not exercised"
