"""Bulk loading documents into a knowledge set: checked first, idempotent, updated in place,
embedded once for every target store."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from flink_agents.api import BaseEmbeddingModel, MemorySetNotFoundError
from flink_agents.integrations.embeddings import LocalEmbeddingModel
from flink_agents.integrations.vector_stores import VectorStore
from flink_agents.integrations.vector_stores.edge import EdgeVectorStore
from flink_agents.memory import knowledge_document_id
from flink_agents.memory.long_term import (
    DocumentFileError,
    VectorKnowledge,
    documents_from,
    load_documents,
    read_documents,
)

DOCS = [
    {"id": "returns", "text": "Items can be returned within 30 days for a full refund."},
    {"id": "shipping", "text": "Standard shipping takes three to five business days."},
    {"id": 7, "title": "Hours", "text": "Support answers the phone from 9am to 6pm."},
]


class CountingEmbedding(BaseEmbeddingModel):
    """The offline model, counting the texts it embeds."""

    def __init__(self, inner: LocalEmbeddingModel) -> None:
        self.inner = inner
        self.texts: list[str] = []

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return self.inner.embed(texts)


def write_lines(path: Path, lines: list[object]) -> Path:
    path.write_text(
        "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n"
    )
    return path


@pytest.fixture
def counting(embedding: LocalEmbeddingModel) -> CountingEmbedding:
    return CountingEmbedding(embedding)


def test_a_file_loads_once_however_often_it_is_loaded(
    tmp_path: Path, store: VectorStore, counting: CountingEmbedding
) -> None:
    documents = read_documents(write_lines(tmp_path / "faq.jsonl", DOCS))
    knowledge = VectorKnowledge(store, counting)
    first = load_documents([knowledge], "faq", documents)
    again = load_documents([knowledge], "faq", read_documents(tmp_path / "faq.jsonl"))
    assert (first.added, first.updated, first.unchanged) == (3, 0, 0)
    assert (again.added, again.updated, again.unchanged) == (0, 0, 3)
    assert len(counting.texts) == 3  # the reload embedded nothing
    faq = knowledge.get_knowledge_set("faq")
    assert faq.size() == 3
    assert [item.value["id"] for item in faq.get()] == ["returns", "shipping", 7]  # file order
    [item] = faq.get(knowledge_document_id("faq", "returns"))
    assert item.value == DOCS[0]  # the whole line is the value


def test_search_finds_a_loaded_document_by_its_text_with_a_score(
    tmp_path: Path, knowledge: VectorKnowledge
) -> None:
    load_documents([knowledge], "faq", read_documents(write_lines(tmp_path / "f.jsonl", DOCS)))
    best, second = knowledge.get_knowledge_set("faq").search("how many days until delivery?", 2)
    assert best.value["id"] == "shipping"
    assert best.score is not None and second.score is not None
    assert 0 < second.score < best.score <= 1
    assert knowledge.get_knowledge_set("faq").get()[0].score is None  # no query, no score


def test_a_changed_document_is_updated_in_place(
    tmp_path: Path, store: VectorStore, counting: CountingEmbedding
) -> None:
    knowledge = VectorKnowledge(store, counting)
    load_documents([knowledge], "faq", documents_from(DOCS))
    [before] = knowledge.get_knowledge_set("faq").get(knowledge_document_id("faq", "shipping"))
    changed = [DOCS[0], {"id": "shipping", "text": "Shipping is free and arrives tomorrow."}]
    counts = load_documents([knowledge], "faq", documents_from(changed))
    assert (counts.added, counts.updated, counts.unchanged) == (0, 1, 1)
    assert counting.texts[-1] == "Shipping is free and arrives tomorrow."
    faq = knowledge.get_knowledge_set("faq")
    assert faq.size() == 3  # a document left out of a later load stays
    [after] = faq.get(before.id)
    assert after.value["text"] == "Shipping is free and arrives tomorrow."
    assert after.created_time == before.created_time < after.updated_time
    assert faq.search("when will my parcel arrive", 1)[0].id == before.id


def test_documents_without_ids_are_identified_by_their_content(
    tmp_path: Path, knowledge: VectorKnowledge
) -> None:
    lines = [{"text": "alpha"}, {"text": "beta"}, {"text": "alpha"}]  # one repeated line
    documents = read_documents(write_lines(tmp_path / "plain.jsonl", lines))
    assert [d.text for d in documents] == ["alpha", "beta"]
    assert all(d.id.startswith("sha256:") for d in documents)
    for _ in range(2):
        load_documents([knowledge], "plain", documents)
    assert knowledge.get_knowledge_set("plain").size() == 2


def test_one_embedding_serves_every_target_store(
    tmp_path: Path, counting: CountingEmbedding
) -> None:
    """The loader writes the local runner's store and a subtask's in one pass."""
    with EdgeVectorStore(tmp_path / "root") as root, EdgeVectorStore(tmp_path / "sub") as sub:
        first = VectorKnowledge(root, counting)
        load_documents([first], "faq", documents_from(DOCS[:1]))
        both = [first, VectorKnowledge(sub, counting)]
        counts = load_documents(both, "faq", documents_from(DOCS), batch_size=2)
        assert (counts.added, counts.updated, counts.unchanged) == (3, 0, 0)  # new to `sub`
        assert len(counting.texts) == 1 + 3  # "returns" embedded once more, for `sub` only
        for target in both:
            assert target.get_knowledge_set("faq").size() == 3


def test_progress_is_reported_per_batch(tmp_path: Path, knowledge: VectorKnowledge) -> None:
    documents = documents_from([{"id": n, "text": f"fact number {n}"} for n in range(5)])
    done: list[int] = []
    load_documents([knowledge], "facts", documents, batch_size=2, on_progress=done.append)
    assert done == [2, 2, 1]


def test_a_custom_text_field_is_embedded_and_shown_as_text(
    tmp_path: Path, knowledge: VectorKnowledge
) -> None:
    path = write_lines(tmp_path / "body.jsonl", [{"key": "a", "body": "Paris is in France."}])
    documents = read_documents(path, id_field="key", text_field="body")
    assert documents[0].id == "a" and documents[0].text == "Paris is in France."
    load_documents([knowledge], "geo", documents)
    [hit] = knowledge.get_knowledge_set("geo").search("French capital", 1)
    assert hit.value == {"key": "a", "body": "Paris is in France.", "text": "Paris is in France."}


BAD_LINES = [
    ('{"id": 1, "text": "fine"}', None),
    ("{not json", "invalid JSON: Expecting property name enclosed in double quotes"),
    ('["a", "list"]', "a document is a JSON object, got an array"),
    ('{"id": 2}', "no 'text' field (the text to embed)"),
    ('{"id": 3, "text": ""}', "'text' must be a non-empty string"),
    ('{"id": 4, "text": 42}', "'text' must be a non-empty string, got 42"),
    ('{"id": true, "text": "x"}', "'id' must be a string or an integer, got true"),
    ('{"id": 1, "text": "again"}', "duplicate id '1' (line 1)"),
    ('{"id": 5, "text": NaN}', "invalid JSON: NaN is not a JSON number"),
]


def test_bad_lines_are_named_by_file_and_line_and_nothing_is_read(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "bad.jsonl", [line for line, _ in BAD_LINES])
    with pytest.raises(DocumentFileError) as caught:
        read_documents(path)
    expected = [(n, r) for n, (_, r) in enumerate(BAD_LINES, start=1) if r is not None]
    assert [line for line, _ in caught.value.problems] == [n for n, _ in expected]
    for (_, reason), (_, wanted) in zip(caught.value.problems, expected, strict=True):
        assert reason.startswith(wanted)
    message = str(caught.value)
    assert message.startswith(f"8 bad lines in {path}; nothing was loaded:")
    assert f"{path}:2: invalid JSON" in message and f"{path}:8: duplicate id '1'" in message


def test_a_line_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"id": 1, "text": "ok"}\n{"id": 2, "text": "caf\xe9"}\n')
    with pytest.raises(DocumentFileError, match=r"latin1.jsonl:2: not UTF-8"):
        read_documents(path)


def test_many_bad_lines_are_summarized(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "worse.jsonl", ["nope"] * 25)
    with pytest.raises(DocumentFileError) as caught:
        read_documents(path)
    assert len(caught.value.problems) == 25
    assert str(caught.value).splitlines()[-1] == "... and 15 more bad line(s)"


def test_documents_given_in_code_are_named_by_position() -> None:
    assert [d.text for d in documents_from(["plain text", {"id": "x", "text": "y"}])] == [
        "plain text",
        "y",
    ]
    with pytest.raises(DocumentFileError, match=r"documents:2: duplicate id 'x'"):
        documents_from([{"id": "x", "text": "a"}, {"id": "x", "text": "b"}])


def test_loading_nothing_creates_the_set(knowledge: VectorKnowledge) -> None:
    with pytest.raises(MemorySetNotFoundError):
        knowledge.get_knowledge_set("empty")
    counts = load_documents([knowledge], "empty", [])
    assert counts.documents == 0
    assert knowledge.get_knowledge_set("empty").size() == 0


def test_an_item_added_in_code_with_a_text_field_is_found_by_its_text(
    knowledge: VectorKnowledge,
) -> None:
    """``add`` embeds like the loader: a long, unrelated field does not blur the search."""
    noise = "invoice VAT number billing address " * 20
    notes = knowledge.create_knowledge_set("notes")
    notes.add(items=[{"text": "The cat sleeps on the sofa.", "meta": noise}, "Taxes are due."])
    assert notes.search("where does the pet nap?", 1)[0].value["text"] == (
        "The cat sleeps on the sofa."
    )
