"""Embedding model connections and setups as Apache Flink Agents names them
(``flink_agents.api.embedding_models.embedding_model``); see ``chat_models.chat_model``."""

from flink_agents.api._embedding import BaseEmbeddingModel


def __getattr__(name: str) -> object:
    if name in ("BaseEmbeddingModelSetup", "BaseEmbeddingModelConnection"):
        import importlib

        migration = importlib.import_module("flink_agents.migration")
        value = {
            "BaseEmbeddingModelSetup": migration.EmbeddingModelSetup,
            "BaseEmbeddingModelConnection": migration.EmbeddingModelConnection,
        }[name]
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BaseEmbeddingModel"
]  # and, made on first use, BaseEmbeddingModelConnection, BaseEmbeddingModelSetup
