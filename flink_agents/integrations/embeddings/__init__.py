"""Embedding models: an offline one that ships with the package, and OpenAI-compatible ones.

Heavy imports (onnxruntime, tokenizers, openai) happen when a model is first built or used,
so importing this package is cheap.
"""

from flink_agents.integrations.embeddings._local import LocalEmbeddingModel
from flink_agents.integrations.embeddings._openai import OpenAIEmbeddingModel

__all__ = ["LocalEmbeddingModel", "OpenAIEmbeddingModel"]
