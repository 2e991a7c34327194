"""Embedding models: the interface every text-to-vector backend implements.

Vector stores and long-term memory depend only on this interface, so a job can swap the
offline model for a hosted one without touching its actions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from flink_agents._ids import durable_name
from flink_agents.api._errors import FlinkAgentsError


class EmbeddingError(FlinkAgentsError, RuntimeError):
    """An embedding backend failed; the message never carries credentials."""


class BaseEmbeddingModel(ABC):
    """Turns texts into L2-normalised vectors of a fixed dimension.

    A provider declared with ``@resource(ResourceType.EMBEDDING_MODEL)`` creates one instance
    per runner (per Flink subtask), so instances need not be picklable.

    Implementers must guarantee:

    - ``embed`` returns one vector per text, in input order, each of length ``dimension``
      with an L2 norm of 1 (within float rounding).
    - The same text gives the same vector on every call, alone or within a batch, as far as
      the backend allows (a local model exactly; a hosted one may differ in the last digits).
    - ``model_id`` names the model *and* whatever changes its vectors (weights, quantisation,
      reduced dimension, serving endpoint). Stores refuse to mix vectors whose ids differ.
    - Calls are safe from several threads at once; expensive set-up (loading weights,
      opening connections) is deferred to the first call so that compiling a plan stays cheap.
    """

    @property
    @abstractmethod
    def model_id(self) -> str:
        """A stable identifier, e.g. ``local:all-MiniLM-L6-v2-int8``."""

    @property
    @abstractmethod
    def dimension(self) -> int:
        """The length of every vector this model returns."""

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts``; an empty sequence returns an empty list.

        Raises:
            EmbeddingError: the backend failed (after its own retries, if any).
        """

    @durable_name("flink_agents.api._embedding:BaseEmbeddingModel.embed_one")
    def embed_one(self, text: str) -> list[float]:
        """Embed a single text; the same vector ``embed([text])[0]`` returns."""
        return self.embed([text])[0]
