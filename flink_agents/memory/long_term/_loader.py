"""Bulk loading of documents into a knowledge set: checked first, embedded once, idempotent.

A document is a JSON object with a ``text`` string (what is embedded and searched) and,
preferably, an ``id``; every other field is kept with it. The whole object becomes the
knowledge item's value. Its point id comes from the set and the document id
(``knowledge_document_id``), or from a hash of the document when it has no id, so loading
the same documents again overwrites instead of duplicating, and a document whose id is
unchanged but whose content changed is updated in place (its ``created_time`` kept).

Documents already stored with the same value are not embedded again: a reload of an
unchanged file costs one point lookup per batch, not a model run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flink_agents._ids import knowledge_document_id
from flink_agents.api import FlinkAgentsError
from flink_agents.integrations.vector_stores import Point, Record
from flink_agents.memory.long_term._codec import CLOCK
from flink_agents.memory.long_term._knowledge import (
    KIND_KNOWLEDGE,
    VectorKnowledge,
    item_payload,
)

DEFAULT_BATCH_SIZE = 64
"""Documents embedded and written per batch (and per progress step)."""

SHOWN_PROBLEMS = 10
"""Bad lines listed in a ``DocumentFileError``; the rest are counted."""


@dataclass(frozen=True)
class KnowledgeDocument:
    """One document to load.

    Attributes:
        id: the document's id: its ``id`` field as a string, or ``sha256:<hex>`` of its
            content when it has none.
        value: the stored value (the whole JSON object).
        text: what is embedded (its ``text`` field).
        where: where it came from, for error messages (``file:line`` or ``document n``).
    """

    id: str
    value: Any
    text: str
    where: str


class DocumentFileError(FlinkAgentsError, ValueError):
    """Documents that cannot be loaded; nothing was loaded.

    Attributes:
        source: the file (or ``documents`` for a list given in code).
        problems: ``(line or position, reason)`` for every bad document.
    """

    def __init__(self, source: str, problems: Sequence[tuple[int, str]]) -> None:
        self.source = source
        self.problems = list(problems)
        label = "line" if source != "documents" else "document"
        shown = [f"{source}:{n}: {reason}" for n, reason in self.problems[:SHOWN_PROBLEMS]]
        hidden = len(self.problems) - len(shown)
        if hidden:
            shown.append(f"... and {hidden} more bad {label}(s)")
        count = len(self.problems)
        super().__init__(
            f"{count} bad {label}{'s' if count != 1 else ''} in {source}; nothing was "
            "loaded:\n" + "\n".join(shown)
        )


@dataclass
class LoadCounts:
    """What a load did: documents new to the set, changed, and already stored as given."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0

    @property
    def documents(self) -> int:
        return self.added + self.updated + self.unchanged


def read_documents(
    path: str | Path, *, id_field: str = "id", text_field: str = "text"
) -> list[KnowledgeDocument]:
    """The documents of a JSON-lines file, one object per line (blank lines skipped).

    Raises:
        OSError: the file cannot be opened or read.
        DocumentFileError: naming the file and each bad line (not UTF-8, not JSON, not an
            object, no ``text_field`` string, an ``id_field`` that is not a string or an
            integer, an id already used on an earlier line).
    """
    path = Path(path)
    problems: list[tuple[int, str]] = []
    documents: list[KnowledgeDocument] = []
    first_line: dict[str, int] = {}
    with path.open("rb") as lines:
        for number, raw in enumerate(lines, start=1):
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError as error:
                problems.append((number, f"not UTF-8 (byte at column {error.start + 1})"))
                continue
            if not text:
                continue
            try:
                record = json.loads(text, parse_constant=_no_constant)
            except json.JSONDecodeError as error:
                problems.append((number, f"invalid JSON: {error.msg} at column {error.colno}"))
                continue
            except ValueError as error:
                problems.append((number, f"invalid JSON: {error}"))
                continue
            try:
                document = _document(record, f"{path}:{number}", id_field, text_field)
            except ValueError as error:
                problems.append((number, str(error)))
                continue
            earlier = first_line.setdefault(document.id, number)
            if earlier != number:
                if document.id.startswith(_HASH_PREFIX):
                    continue  # the same document without an id, twice: stored once
                problems.append((number, f"duplicate {id_field} {document.id!r} (line {earlier})"))
                continue
            documents.append(document)
    if problems:
        raise DocumentFileError(str(path), problems)
    return documents


def documents_from(
    records: Iterable[Any], *, id_field: str = "id", text_field: str = "text"
) -> list[KnowledgeDocument]:
    """Documents given in code: objects as in a file, or plain strings (their own text).

    Raises:
        DocumentFileError: naming each bad document by its position (1-based).
    """
    problems: list[tuple[int, str]] = []
    documents: dict[str, KnowledgeDocument] = {}
    for number, record in enumerate(records, start=1):
        if isinstance(record, str):
            record = {text_field: record}
        try:
            document = _document(record, f"document {number}", id_field, text_field)
        except ValueError as error:
            problems.append((number, str(error)))
            continue
        if document.id in documents and not document.id.startswith(_HASH_PREFIX):
            problems.append((number, f"duplicate {id_field} {document.id!r}"))
            continue
        documents.setdefault(document.id, document)
    if problems:
        raise DocumentFileError("documents", problems)
    return list(documents.values())


def load_documents(
    targets: Sequence[VectorKnowledge],
    set_name: str,
    documents: Sequence[KnowledgeDocument],
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    on_progress: Callable[[int], None] | None = None,
) -> LoadCounts:
    """Write ``documents`` into knowledge set ``set_name`` of every target (created if
    missing), embedding each changed document once for all of them.

    A document counts as ``unchanged`` when every target already holds it with this value,
    ``updated`` when some target holds another value under its id, else ``added`` (new to
    at least one target).

    Args:
        targets: the knowledge stores to write; all must use the same embedding model.
        on_progress: called with the number of documents done after each batch.
    """
    if not targets:
        raise ValueError("load_documents needs at least one target")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    for target in targets:
        target.create_knowledge_set(set_name)
    counts = LoadCounts()
    for start in range(0, len(documents), batch_size):
        batch = documents[start : start + batch_size]
        _load_batch(targets, set_name, batch, counts)
        if on_progress is not None:
            on_progress(len(batch))
    return counts


def _load_batch(
    targets: Sequence[VectorKnowledge],
    set_name: str,
    batch: Sequence[KnowledgeDocument],
    counts: LoadCounts,
) -> None:
    """Embed the documents some target lacks (once), write each target what it lacks."""
    ids = [knowledge_document_id(set_name, d.id) for d in batch]
    stored = [_stored(target, ids) for target in targets]
    stale = [
        [i for i, d in enumerate(batch) if not _holds(found.get(ids[i]), set_name, d.value)]
        for found in stored
    ]
    dirty = sorted(set().union(*stale))
    vectors = targets[0].embedding.embed([batch[i].text for i in dirty])
    vector_of = dict(zip(dirty, vectors, strict=True))
    written = {i: CLOCK.now() for i in dirty}  # strictly increasing: get() keeps file order
    for target, found, indexes in zip(targets, stored, stale, strict=True):
        points = []
        for i in indexes:
            created = _created_time(found.get(ids[i]), set_name) or written[i]
            payload = item_payload(set_name, batch[i].value, created, written[i])
            points.append(Point(ids[i], vector_of[i], payload))
        if points:
            target.store.upsert(target.collection, points)
    for i, document in enumerate(batch):
        if i not in vector_of:
            counts.unchanged += 1
        elif any(_replaced(found.get(ids[i]), set_name, document.value) for found in stored):
            counts.updated += 1
        else:
            counts.added += 1


_HASH_PREFIX = "sha256:"


def _document(record: Any, where: str, id_field: str, text_field: str) -> KnowledgeDocument:
    """One checked document; ValueError says what is wrong with it."""
    if not isinstance(record, Mapping):
        raise ValueError(f"a document is a JSON object, got {_json_type(record)}")
    text = record.get(text_field)
    if text_field not in record:
        raise ValueError(f"no {text_field!r} field (the text to embed)")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{text_field!r} must be a non-empty string, got {_shown(text)}")
    try:
        value = json.loads(json.dumps(record, ensure_ascii=False))
    except (TypeError, ValueError) as error:
        raise ValueError(f"not a JSON value: {error}") from None
    # knowledge_text() shows an item by its "text" field, whatever the file calls it
    if text_field != "text" and value.setdefault("text", text) != text:
        raise ValueError(f"has both {text_field!r} (the text to embed) and another 'text'")
    raw_id = record.get(id_field)
    if raw_id is None:
        canonical = json.dumps(value, sort_keys=True, ensure_ascii=False)
        document_id = _HASH_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()[:32]
    elif isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
        raise ValueError(f"{id_field!r} must be a string or an integer, got {_shown(raw_id)}")
    elif isinstance(raw_id, str) and not raw_id.strip():
        raise ValueError(f"{id_field!r} must not be empty")
    else:
        document_id = str(raw_id)
    return KnowledgeDocument(document_id, value, text, where)


def _stored(target: VectorKnowledge, ids: list[str]) -> dict[str, Record]:
    return {record.id: record for record in target.store.get(target.collection, ids)}


def _holds(record: Record | None, set_name: str, value: Any) -> bool:
    """Whether ``record`` is already this set's item with exactly ``value``."""
    return (
        record is not None
        and record.payload.get("kind") == KIND_KNOWLEDGE
        and record.payload.get("set") == set_name
        and record.payload.get("value") == value
    )


def _replaced(record: Record | None, set_name: str, value: Any) -> bool:
    """Whether ``record`` is this set's item with another value (which the load replaced)."""
    return _created_time(record, set_name) is not None and not _holds(record, set_name, value)


def _created_time(record: Record | None, set_name: str) -> float | None:
    if record is None or record.payload.get("set") != set_name:
        return None
    return record.payload.get("created_time")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _json_type(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."
