"""``flink-agents knowledge load`` and ``search`` end to end, in child processes: load the
example's documents, reload them (nothing added), answer questions with ``flink-agents run``
over plans/knowledge_qa.yaml, and the errors a user meets (bad lines, a missing file, a store
that a running job holds)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from flink_agents.integrations.embeddings import LocalEmbeddingModel
from flink_agents.integrations.vector_stores import open_vector_store
from flink_agents.memory.long_term import VectorKnowledge
from flink_agents.testing import clean_environment
from flink_agents.testing.llm_server import Rule

REPO = Path(__file__).resolve().parents[2]
FAQ = REPO / "data/product_faq.jsonl"
PLAN = REPO / "plans/knowledge_qa.yaml"
COMMAND = Path(sys.executable).with_name("flink-agents")


def flink_agents(*args, data_dir: Path, **env) -> subprocess.CompletedProcess:
    environment = {**clean_environment(), "FLINK_AGENTS_DATA_DIR": str(data_dir), **env}
    environment.pop("FLINK_CONF_DIR", None)
    return subprocess.run(
        [COMMAND, *map(str, args)],
        env=environment,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_load_then_reload_then_answer_with_the_example_plan(tmp_path, llm_server):
    data = tmp_path / "data"
    first = flink_agents("knowledge", "load", "product_faq", FAQ, data_dir=data)
    assert first.returncode == 0, first.stderr
    store = (data / "vector-store").resolve()
    summary = re.sub(r" in [0-9.]+s;", " in Ns;", first.stdout)
    assert summary == (
        f"loaded knowledge set 'product_faq': 8 documents from {FAQ} (8 added, 0 updated, "
        f"0 unchanged) in Ns; store: {store}\n"
    )
    assert "loading product_faq" in first.stderr  # the progress bar
    again = flink_agents("knowledge", "load", "product_faq", FAQ, "--quiet", data_dir=data)
    assert again.returncode == 0, again.stderr
    assert "(0 added, 0 updated, 8 unchanged)" in again.stdout
    assert again.stderr == ""

    found = flink_agents("knowledge", "search", "product_faq", "reset my password", data_dir=data)
    assert found.returncode == 0, found.stderr
    top = found.stdout.splitlines()[0].split("  ", 1)
    assert 0 < float(top[0]) <= 1 and json.loads(top[1])["id"] == "password"
    assert len(found.stdout.splitlines()) == 3

    llm_server.add_rule(Rule(system_contains="valid for one hour", reply_text="Use the link."))
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"user": "ana", "question": "How do I reset my password?"}))
    answers = tmp_path / "answers.jsonl"
    ran = flink_agents(
        "run", PLAN, questions, "--key", "user", "--output", answers,
        data_dir=data, OPENAI_BASE_URL=llm_server.base_url, OPENAI_API_KEY="sk-cli-2468",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    [answer] = [json.loads(line) for line in answers.read_text().splitlines()]
    assert answer == {
        "question": "How do I reset my password?",
        "sources": ["password", "support-hours"],
        "answer": "Use the link.",
    }


def test_bad_lines_are_named_and_nothing_is_loaded(tmp_path):
    documents = tmp_path / "docs.jsonl"
    documents.write_text('{"id": "a", "text": "fine"}\n{"id": "b"}\nnot json\n')
    result = flink_agents("knowledge", "load", "docs", documents, data_dir=tmp_path / "data")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: 2 bad lines in {documents}; nothing was loaded:",
        f"{documents}:2: no 'text' field (the text to embed)",
        f"{documents}:3: invalid JSON: Expecting value at column 1",
    ]
    assert not (tmp_path / "data").exists()


def test_a_missing_file_is_one_line(tmp_path):
    missing = tmp_path / "nowhere.jsonl"
    result = flink_agents("knowledge", "load", "docs", missing, data_dir=tmp_path)
    assert result.returncode == 2
    assert result.stderr == f"error: cannot read {missing}: No such file or directory\n"


def test_a_load_goes_through_a_running_job_that_holds_the_store(tmp_path):
    """This process holds (and serves) the store, as a job's worker would: the command's
    load reaches it, and this process sees the documents at once."""
    with open_vector_store(tmp_path / "vector-store") as held:
        assert held.hosting
        result = flink_agents("knowledge", "load", "faq", FAQ, "--quiet", data_dir=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "(8 added, 0 updated, 0 unchanged)" in result.stdout
        knowledge = VectorKnowledge(held, LocalEmbeddingModel())
        assert knowledge.get_knowledge_set("faq").size() == 8


def test_options_on_the_command_line_choose_the_store(tmp_path):
    store = tmp_path / "elsewhere"
    result = flink_agents(
        "knowledge", "load", "faq", FAQ, "--store", store, "--quiet",
        data_dir=tmp_path / "unused",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith(f"store: {store.resolve()}\n")
    assert not (tmp_path / "unused").exists()
    missing = flink_agents("knowledge", "search", "other", "q", "--store", store, data_dir=tmp_path)
    assert missing.returncode == 1
    assert missing.stderr == f"error: no knowledge set 'other' in {store}\n"
