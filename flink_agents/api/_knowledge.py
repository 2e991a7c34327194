"""Knowledge (seed 001): named knowledge sets shared by every key and every job.

Facts, experience and prior knowledge that outlive any one job: the framework neither
compacts nor scopes them. ``flink_agents.memory.long_term`` implements these interfaces on a
vector store; knowledge shared between processes (Flink subtasks) needs a Qdrant server.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel


class KnowledgeSetItem(BaseModel):
    """One knowledge item.

    Attributes:
        id: its id (a UUID string).
        name: the knowledge set it belongs to.
        value: its content: any JSON value.
        created_time: when it was added (UTC).
        updated_time: when it was last written (UTC); equal to ``created_time`` until updated.
        score: from ``search``, the cosine similarity to the query (higher is closer); None
            from ``get``.
    """

    id: str
    name: str
    value: Any
    created_time: datetime
    updated_time: datetime
    score: float | None = None


def knowledge_text(value: Any) -> str:
    """The text a knowledge item is embedded by, and shown as in a prompt.

    A string is its own text; an object with a ``text`` string (a loaded document, see
    ``flink-agents knowledge load``) is found by that text alone, so its id and other fields
    neither blur the search nor need to be in the prompt; any other value is its JSON.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return value["text"]
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


class KnowledgeSet(ABC):
    """A named set of JSON values, searchable by meaning."""

    @property
    @abstractmethod
    def name(self) -> str:
        """The set's name."""

    @abstractmethod
    def add(self, item: Any = None, *, items: Sequence[Any] | None = None) -> list[str]:
        """Add one value (``item``) or several (``items``); returns their ids in order."""

    @abstractmethod
    def update(self, id: str, item: Any) -> KnowledgeSetItem:
        """Replace the value of item ``id``, keeping its ``created_time``.

        Raises:
            KeyError: no item has that id in this set.
        """

    @abstractmethod
    def get(self, ids: str | Sequence[str] | None = None) -> list[KnowledgeSetItem]:
        """These items (missing ones left out), or every item, oldest first, for None."""

    @abstractmethod
    def search(self, query: str, limit: int = 10) -> list[KnowledgeSetItem]:
        """The ``limit`` items closest in meaning to ``query``, best first, each with its
        ``score``."""

    @abstractmethod
    def delete(self, ids: str | Sequence[str] | None = None) -> None:
        """Delete these items (unknown ids are ignored), or every item for None."""

    @abstractmethod
    def size(self) -> int:
        """How many items the set holds."""


class Knowledge(ABC):
    """Every knowledge set (``ctx.knowledge``): the same from every key and job."""

    @abstractmethod
    def create_knowledge_set(self, name: str) -> KnowledgeSet:
        """Create the set, or return it if it exists."""

    @abstractmethod
    def get_knowledge_set(self, name: str) -> KnowledgeSet:
        """The existing set ``name``.

        Raises:
            MemorySetNotFoundError: no such set.
        """

    @abstractmethod
    def delete_knowledge_set(self, name: str) -> bool:
        """Delete the set and its items; False if it did not exist."""
