"""Loading documents into a knowledge set where jobs will read it (``flink-agents knowledge``).

The store is found exactly as runners find it (``store_location``): ``long-term-memory-store``
if set (a Qdrant server URL, or a directory), else ``<data-dir>/vector-store``, with the
options read from Flink's ``config.yaml`` and overridden in code.

Every runner and every Flink subtask of a machine uses the same embedded store directory
(``flink_agents.integrations.vector_stores.shared``: the first process to open it serves the
others), so one load is seen by the local runner and by jobs of any parallelism, and a load
may run while a job has the store open.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flink_agents.api import (
    BaseEmbeddingModel,
    FlinkAgentsError,
    KnowledgeSetItem,
    MemorySetNotFoundError,
)
from flink_agents.memory.long_term import (
    DEFAULT_BATCH_SIZE,
    DocumentFileError,
    VectorKnowledge,
    documents_from,
    load_documents,
    read_documents,
)
from flink_agents.runtime._long_term import open_store, store_location
from flink_agents.runtime._options import AgentOptions, load_options

__all__ = [
    "DocumentFileError",
    "KnowledgeLoadReport",
    "knowledge_stores",
    "load_knowledge",
    "search_knowledge",
]


@dataclass
class KnowledgeLoadReport:
    """What ``load_knowledge`` did.

    Attributes:
        set_name: the knowledge set.
        source: the file, or ``documents`` for documents given in code.
        documents: how many distinct documents were given.
        added: documents that were new to the set.
        updated: documents whose id was stored with another content (rewritten in place).
        unchanged: documents already stored as given (not embedded again).
        stores: every store written, a URL or a directory.
        elapsed: seconds taken.
    """

    set_name: str
    source: str
    documents: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    stores: list[str] = field(default_factory=list)
    elapsed: float = 0.0

    def summary(self) -> str:
        """One line for people: what was loaded where."""
        return (
            f"knowledge set {self.set_name!r}: {self.documents} documents from {self.source} "
            f"({self.added} added, {self.updated} updated, {self.unchanged} unchanged) in "
            f"{self.elapsed:.1f}s; store: {', '.join(self.stores)}"
        )


def knowledge_stores(options: AgentOptions) -> list[str]:
    """The stores a load writes for these options: a server URL, or the embedded store's
    directory."""
    root = store_location(options)
    if root.startswith(("http://", "https://", ":memory:")):
        return [root]
    return [str(Path(root).resolve())]


def load_knowledge(
    set_name: str,
    source: str | os.PathLike[str] | Iterable[Any],
    *,
    options: AgentOptions | Mapping[str, Any] | None = None,
    embedding_model: BaseEmbeddingModel | None = None,
    id_field: str = "id",
    text_field: str = "text",
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: bool = False,
) -> KnowledgeLoadReport:
    """Load documents into knowledge set ``set_name``, with embeddings, idempotently.

    Each document is a JSON object with a ``text`` string (embedded and searched) and an
    ``id`` (a string or an integer); other fields are kept. Without an ``id``, a hash of the
    document is its id. Loading the same documents again adds nothing (unchanged documents
    are not even embedded again); a document whose id is known but whose content changed is
    rewritten in place. Documents missing from a later load are left in the set (delete the
    set first for a clean reload: ``ctx.knowledge.delete_knowledge_set`` or
    ``VectorKnowledge``).

    Every document is checked before anything is written: one bad line loads nothing.

    Args:
        set_name: the knowledge set (created if missing), as ``ContextRetrievalRequestEvent``
            and ``ctx.knowledge`` name it.
        source: a JSON-lines file (one document per line), or documents in code (dicts, or
            plain strings, which are their own text).
        options: agent options or their overrides (``{"data-dir": ...}``,
            ``{"long-term-memory-store": ...}``), over Flink's ``config.yaml`` as runners read
            it; None: ``config.yaml`` and the defaults.
        embedding_model: the model the job's long-term memory uses; None: the offline
            MiniLM model (the runners' default).
        id_field: the field holding a document's id.
        text_field: the field holding a document's text.
        batch_size: documents embedded and written at a time.
        progress: show a progress bar on standard error.

    Raises:
        OSError: the file cannot be read.
        DocumentFileError: bad documents, each named by file and line (nothing was loaded).
        StoreLockedError: an embedded store is held by a process that does not serve it.
        FlinkAgentsError: invalid options; a store made for another embedding model.
    """
    if not isinstance(set_name, str) or not set_name:
        raise ValueError(f"a knowledge set name is a non-empty str, got {set_name!r}")
    started = time.perf_counter()
    if isinstance(source, str | os.PathLike):
        where = str(source)
        documents = read_documents(Path(source), id_field=id_field, text_field=text_field)
    else:
        where = "documents"
        documents = documents_from(source, id_field=id_field, text_field=text_field)
    if not isinstance(options, AgentOptions):
        options = load_options(dict(options or {}))
    embedding = embedding_model or _default_embedding(options)
    report = KnowledgeLoadReport(set_name, where, documents=len(documents))
    report.stores = knowledge_stores(options)
    with contextlib.ExitStack() as opened:
        targets = []
        for location in report.stores:
            store = opened.enter_context(open_store(location))
            targets.append(VectorKnowledge(store, embedding))
        with _progress_bar(progress, set_name, len(documents)) as advance:
            counts = load_documents(
                targets, set_name, documents, batch_size=batch_size, on_progress=advance
            )
    report.added, report.updated, report.unchanged = counts.added, counts.updated, counts.unchanged
    report.elapsed = time.perf_counter() - started
    return report


def search_knowledge(
    set_name: str,
    query: str,
    limit: int = 3,
    *,
    options: AgentOptions | Mapping[str, Any] | None = None,
    embedding_model: BaseEmbeddingModel | None = None,
) -> list[KnowledgeSetItem]:
    """The ``limit`` documents of a knowledge set closest to ``query``, with their scores, as
    the local runner's ``ContextRetrievalRequestEvent`` would find them (to check a load).

    Raises:
        MemorySetNotFoundError: no such set in that store.
        StoreLockedError: the embedded store is held by a process that does not serve it.
    """
    if not isinstance(options, AgentOptions):
        options = load_options(dict(options or {}))
    embedding = embedding_model or _default_embedding(options)
    location = store_location(options)
    with open_store(location) as store:
        knowledge = VectorKnowledge(store, embedding)
        try:
            found = knowledge.get_knowledge_set(set_name)
        except MemorySetNotFoundError:
            raise MemorySetNotFoundError(f"no knowledge set {set_name!r} in {location}") from None
        return found.search(query, limit)


def _default_embedding(options: AgentOptions) -> BaseEmbeddingModel:
    if options.long_term_memory_embedding:
        raise FlinkAgentsError(
            f"the agent option long-term-memory-embedding names the resource "
            f"{options.long_term_memory_embedding!r}: pass that model as embedding_model= "
            "(the command line loads with the offline MiniLM model only)"
        )
    from flink_agents.integrations.embeddings import LocalEmbeddingModel

    return LocalEmbeddingModel()


@contextlib.contextmanager
def _progress_bar(show: bool, set_name: str, total: int) -> Iterator[Any]:
    """A callback advancing a rich progress bar on standard error (or doing nothing)."""
    if not show:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    columns = (
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task = bar.add_task(f"loading {set_name}", total=total)
        yield lambda done: bar.advance(task, done)
