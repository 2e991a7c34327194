"""Embedding model connections and setups as Apache Flink Agents defines them
(``flink_agents.api.embedding_models.embedding_model``), for embedding models of your own
written their way; see ``chat_models.chat_model``."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from flink_agents.api._embedding import BaseEmbeddingModel
from flink_agents.api._resources import ResourceType
from flink_agents.api.resource import Resource


class BaseEmbeddingModelConnection(Resource):
    """Where an embedding provider is, and how to call it."""

    @classmethod
    def resource_type(cls) -> ResourceType:
        return ResourceType.EMBEDDING_MODEL_CONNECTION

    @abstractmethod
    def embed(self, text: str | Sequence[str], **kwargs: Any) -> list[float] | list[list[float]]:
        """The vector of a text, or the vectors of texts."""


class BaseEmbeddingModelSetup(Resource):
    """An embedding model at a connection."""

    connection: str

    @classmethod
    def resource_type(cls) -> ResourceType:
        return ResourceType.EMBEDDING_MODEL

    @property
    @abstractmethod
    def model_kwargs(self) -> dict[str, Any]:
        """Arguments of every call to the connection."""

    def embed(self, text: str | Sequence[str], **kwargs: Any) -> list[float] | list[list[float]]:
        connection = self.get_resource(self.connection, ResourceType.EMBEDDING_MODEL_CONNECTION)
        return connection.embed(text, **{**self.model_kwargs, **kwargs})


__all__ = ["BaseEmbeddingModel", "BaseEmbeddingModelConnection", "BaseEmbeddingModelSetup"]
