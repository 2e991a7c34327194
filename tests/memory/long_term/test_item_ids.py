"""Every item an action writes gets an id of its own, the same when the action runs again:
many adds through fresh views of long-term memory and knowledge, across sets, in sync and
async actions, on the local runner and in MiniCluster, with a failed first execution retried.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.integrations.embeddings import LocalEmbeddingModel
from flink_agents.integrations.vector_stores import open_vector_store
from flink_agents.memory.long_term import VectorKnowledge, VectorLongTermMemory
from tests.memory.long_term.id_agents import ManyItemsAgent


def records(markers: Path) -> list[dict[str, Any]]:
    return [
        {"user": "ana", "mode": "sync", "tag": "s1", "n": 3},
        {"user": "bo", "mode": "async", "tag": "a1", "n": 4, "fail_once": str(markers / "a1")},
        {"user": "ana", "mode": "async", "tag": "a2", "n": 3, "fail_once": str(markers / "a2")},
        {"user": "bo", "mode": "sync", "tag": "s2", "n": 2, "fail_once": str(markers / "s2")},
    ]


def run(env: Any, store: Path, markers: Path) -> list[dict[str, Any]]:
    agents = AgentsExecutionEnvironment.get_execution_environment(
        env,
        long_term_memory_store=str(store),
        error_policy="retry",
        retry_max_attempts=2,
        retry_initial_backoff_ms=1,
    )
    return agents.from_list(records(markers), "user").apply(ManyItemsAgent).to_list()


def check(outputs: list[dict[str, Any]], store: Path, markers: Path) -> None:
    by_tag = {o["tag"]: o for o in outputs}
    counts = {tag: len(o["ids"]) for tag, o in by_tag.items()}
    assert counts == {"s1": 9, "a1": 12, "a2": 9, "s2": 6}
    every_id = [item for o in outputs for item in o["ids"]]
    assert len(set(every_id)) == len(every_id)
    every_external = [e for o in outputs for e in o["external"]]
    assert len(set(every_external)) == len(every_external) == 8
    for tag in ("a1", "a2", "s2"):  # the retry took the ids its failed attempt took
        assert json.loads((markers / tag).read_text()) == by_tag[tag]["external"]
    with open_vector_store(str(store)) as vectors:
        embedding = LocalEmbeddingModel()
        memory = VectorLongTermMemory(vectors, embedding)
        try:
            for user in ("ana", "bo"):
                view = memory.for_key(user)
                assert view.get_memory_set("notes").size() == 6, user
                assert view.get_memory_set("todo").size() == 6, user
        finally:
            memory.close()
        facts = VectorKnowledge(vectors, embedding).get_knowledge_set("facts")
        assert facts.size() == 12


def test_local_runner(tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    outputs = run(None, tmp_path / "vectors", markers)
    check(outputs, tmp_path / "vectors", markers)


@pytest.mark.flink
def test_minicluster(tmp_path: Path) -> None:
    from pyflink.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)  # two Python workers (in process mode), one store
    markers = tmp_path / "markers"
    markers.mkdir()
    outputs = run(env, tmp_path / "vectors", markers)
    check(outputs, tmp_path / "vectors", markers)
