"""Resources: named things actions use (models, tools, prompts, stores), created lazily."""

from __future__ import annotations

from enum import StrEnum


class ResourceType(StrEnum):
    """The kind of a resource; ``ctx.get_resource(name, type)`` checks it."""

    CHAT_MODEL = "chat_model"
    EMBEDDING_MODEL = "embedding_model"
    PROMPT = "prompt"
    TOOL = "tool"
    VECTOR_STORE = "vector_store"
    CUSTOM = "custom"
