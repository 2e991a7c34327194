"""``load_knowledge``: documents go where runners read them (the one store of the machine,
which the local runner and every Flink subtask open), with the runners' option resolution."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flink_agents.api import FlinkAgentsError, MemorySetNotFoundError
from flink_agents.integrations.embeddings import LocalEmbeddingModel
from flink_agents.memory import IdMinter
from flink_agents.plan import bind_plan, compile_agent
from flink_agents.runtime import (
    AgentOptions,
    DocumentFileError,
    knowledge_stores,
    load_knowledge,
    search_knowledge,
)
from flink_agents.runtime._long_term import LongTermProvider
from flink_agents.runtime._resources import ResourceCache
from tests.integrations.rag.agents import AskAgent
from tests.integrations.rag.conftest import FAQ
from tests.integrations.rag.test_retrieval import run


def faq_file(tmp_path: Path) -> Path:
    path = tmp_path / "faq.jsonl"
    path.write_text("".join(json.dumps(document) + "\n" for document in FAQ))
    return path


def knowledge_seen_by(options: AgentOptions):
    """The knowledge a runner (the local one, or any Flink subtask) opens."""
    resources = ResourceCache(bind_plan(compile_agent(AskAgent)))
    provider = LongTermProvider(options, resources)
    return provider, provider.knowledge(IdMinter())


def test_a_load_reaches_every_runner(tmp_path):
    report = load_knowledge("faq", faq_file(tmp_path), options={"data-dir": str(tmp_path)})
    root = (tmp_path / "vector-store").resolve()
    assert report.stores == [str(root)]
    assert (report.documents, report.added, report.updated, report.unchanged) == (4, 4, 0, 0)
    provider, knowledge = knowledge_seen_by(AgentOptions(data_dir=str(tmp_path)))
    try:
        assert knowledge.get_knowledge_set("faq").size() == 4
    finally:
        provider.close()


def test_reloading_the_same_file_adds_nothing(tmp_path):
    options = {"data-dir": str(tmp_path)}
    load_knowledge("faq", faq_file(tmp_path), options=options)
    again = load_knowledge("faq", faq_file(tmp_path), options=options)
    assert (again.added, again.updated, again.unchanged) == (0, 0, 4)
    assert "4 documents" in again.summary() and "0 added" in again.summary()
    ask_all = {"ask": "refund", "set": "faq", "limit": 10}
    [out] = run(AskAgent, [ask_all], str(tmp_path / "vector-store"))
    assert sorted(out["ids"]) == sorted(d["id"] for d in FAQ)  # each once


def test_a_load_while_a_runner_has_the_store_open(tmp_path):
    """A runner holds the store; a load from another process goes through it, and the
    runner sees the documents at once (no restart, no copy)."""
    import subprocess
    import sys
    import textwrap

    options = AgentOptions(data_dir=str(tmp_path))
    provider, knowledge = knowledge_seen_by(options)
    try:
        knowledge.create_knowledge_set("faq")  # opens (and hosts) the store here
        loader = textwrap.dedent(f"""
            from flink_agents.runtime import load_knowledge
            from tests.integrations.rag.conftest import FAQ
            print(load_knowledge("faq", FAQ, options={{"data-dir": {str(tmp_path)!r}}}).added)
        """)
        result = subprocess.run(
            [sys.executable, "-c", loader],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=Path(__file__).resolve().parents[3],
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "4"
        assert knowledge.get_knowledge_set("faq").size() == 4
    finally:
        provider.close()


def test_a_server_is_one_store():
    options = AgentOptions(long_term_memory_store="http://qdrant.internal:6333")
    assert knowledge_stores(options) == ["http://qdrant.internal:6333"]


def test_the_store_comes_from_config_yaml_as_for_runners(tmp_path, monkeypatch):
    store = tmp_path / "from-config"
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "config.yaml").write_text(f"agent:\n  long-term-memory-store: {store}\n")
    monkeypatch.setenv("FLINK_CONF_DIR", str(tmp_path / "conf"))
    report = load_knowledge("faq", FAQ)
    assert report.stores == [str(store.resolve())]
    found = search_knowledge("faq", "when does support pick up the phone", 1)
    assert [item.value["id"] for item in found] == ["hours"]


def test_a_bad_file_loads_nothing(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(FAQ[0]) + "\n" + '{"id": "x"}\n')
    with pytest.raises(DocumentFileError, match=rf"{path}:2: no 'text' field"):
        load_knowledge("faq", path, options={"data-dir": str(tmp_path)})
    assert not (tmp_path / "vector-store").exists()


def test_a_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_knowledge("faq", tmp_path / "nope.jsonl", options={"data-dir": str(tmp_path)})


def test_a_configured_embedding_resource_must_be_passed_in(tmp_path):
    options = {"data-dir": str(tmp_path), "long-term-memory-embedding": "embedder"}
    with pytest.raises(FlinkAgentsError, match="pass that model as embedding_model="):
        load_knowledge("faq", FAQ, options=options)
    report = load_knowledge("faq", FAQ, options=options, embedding_model=LocalEmbeddingModel())
    assert report.added == 4


def test_searching_a_missing_set_names_the_store(tmp_path):
    with pytest.raises(MemorySetNotFoundError, match="no knowledge set 'faq' in"):
        search_knowledge("faq", "q", options={"data-dir": str(tmp_path)})
