"""Hosted embeddings through the OpenAI API, or any server that speaks its embeddings route."""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import numpy as np

from flink_agents._ids import durable_name
from flink_agents.api import BaseEmbeddingModel, EmbeddingError

if TYPE_CHECKING:
    import openai

# Native sizes of OpenAI's models; another server's model is measured on its first response.
_NATIVE_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
# OpenAI takes up to 2048 inputs per request; smaller requests cost less to retry.
_MAX_INPUTS_PER_REQUEST = 256
# Self-hosted OpenAI-compatible servers often need no key, but the client insists on one.
_NO_KEY = "no-key"
_MAX_ERROR_CHARS = 500


class OpenAIEmbeddingModel(BaseEmbeddingModel):
    """Embeddings from OpenAI or an OpenAI-compatible server (vLLM, Ollama, LiteLLM, ...).

    ``api_key`` and ``base_url`` default to ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``. The key
    never appears in ``repr()`` nor in an ``EmbeddingError``. Failed requests are retried by
    the ``openai`` client (``max_retries``) before an ``EmbeddingError`` is raised.

    Args:
        model: the model name the server knows.
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``; None means OpenAI's.
        api_key: the bearer key; optional when ``base_url`` points at a server without auth.
        dimension: the vector length. For ``text-embedding-3-*`` a smaller value asks the
            server to shorten vectors; for other models it is checked against responses.
            None means the model's native size (learnt from the first response if unknown).
        timeout: seconds per HTTP request.
        max_retries: retries of one request on connection errors, 429 and 5xx.
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        base_url: str | None = None,
        api_key: str | None = None,
        dimension: int | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
    ) -> None:
        import openai  # ~0.7 s to import: paid only by jobs that use this model

        if dimension is not None and dimension < 1:
            raise ValueError(f"dimension must be >= 1 or None, got {dimension}")
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if api_key is None:
            if base_url is None:
                raise ValueError("no API key: pass api_key or set OPENAI_API_KEY")
            api_key = _NO_KEY
        self._client = openai.OpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )
        self._model = model
        self._host = (urlsplit(str(self._client.base_url)).hostname or "unknown").lower()
        native = _NATIVE_DIMENSIONS.get(model)
        # Only the text-embedding-3 family can shorten vectors; other servers may reject it.
        self._shorten = (
            dimension is not None and dimension != native and model.startswith("text-embedding-3")
        )
        self._dimension = dimension if dimension is not None else native

    @property
    def model_id(self) -> str:
        suffix = f"?dimensions={self._dimension}" if self._shorten else ""
        return f"openai:{self._model}@{self._host}{suffix}"

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self.embed(["dimension probe"])  # an unknown model: ask the server once
        assert self._dimension is not None
        return self._dimension

    def __repr__(self) -> str:
        return (
            f"OpenAIEmbeddingModel(model={self._model!r}, "
            f"base_url={str(self._client.base_url)!r}, dimension={self._dimension})"
        )

    @durable_name("flink_agents.integrations.embeddings._openai:OpenAIEmbeddingModel.embed")
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; use embed_one() for one text")
        texts = list(texts)
        vectors: list[list[float]] = []
        for start in range(0, len(texts), _MAX_INPUTS_PER_REQUEST):
            vectors.extend(self._request(texts[start : start + _MAX_INPUTS_PER_REQUEST]))
        return vectors

    def _request(self, texts: list[str]) -> list[list[float]]:
        import openai

        options: dict[str, Any] = {"dimensions": self._dimension} if self._shorten else {}
        try:
            # base64 (little-endian float32) is a quarter of the JSON floats' size and decodes
            # without parsing; a server that ignores it and sends floats is read as well.
            # The raw body: the client's typed response builds a model object per row, which
            # cost as much as decoding the vectors (the rows are read here, checked below).
            raw = self._client.embeddings.with_raw_response.create(
                model=self._model, input=texts, encoding_format="base64", **options
            )
            body = raw.http_response.content
        except openai.OpenAIError as exc:
            failure = self._describe(exc)
        else:
            rows = [_decoded(row["embedding"]) for row in self._rows(body)]
            return self._vectors(rows, len(texts))
        # Raised outside the handler so the client's exception, which holds the request and
        # its Authorization header, is not chained to ours.
        raise EmbeddingError(failure)

    def _vectors(self, rows: list[Any], expected: int) -> list[list[float]]:
        if len(rows) != expected:
            raise EmbeddingError(
                f"{self._where()}: asked for {expected} vectors, the server returned {len(rows)}"
            )
        matrix = np.asarray(rows, dtype=np.float64)
        if matrix.ndim != 2:
            raise EmbeddingError(f"{self._where()}: the server returned vectors of mixed length")
        if self._dimension is None:
            self._dimension = matrix.shape[1]
        if matrix.shape[1] != self._dimension:
            raise EmbeddingError(
                f"{self._where()}: expected {self._dimension}-dimensional vectors, "
                f"the server returned {matrix.shape[1]}"
            )
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        if not np.all(np.isfinite(norms)) or np.any(norms == 0):
            raise EmbeddingError(f"{self._where()}: the server returned a zero or invalid vector")
        # OpenAI's vectors are unit length already; compatible servers' often are not.
        return (matrix / norms).tolist()

    def _rows(self, body: bytes) -> list[dict[str, Any]]:
        """The response's rows sorted by ``index`` (servers need not return them in order).

        Raises:
            EmbeddingError: the body is not an embeddings response.
        """
        try:
            rows = json.loads(body)["data"]
            return sorted(rows, key=lambda row: row["index"])
        except (ValueError, KeyError, TypeError) as error:
            raise EmbeddingError(
                f"{self._where()}: the server's response is not a list of embeddings "
                f"({type(error).__name__}: {error})"
            ) from None

    def _describe(self, exc: openai.OpenAIError) -> str:
        status = getattr(exc, "status_code", None)
        kind = type(exc).__name__ + (f" (HTTP {status})" if status is not None else "")
        message = str(exc)
        key = self._client.api_key
        if key and key != _NO_KEY:
            message = message.replace(key, "***")
        return f"{self._where()}: {kind}: {message[:_MAX_ERROR_CHARS]}"

    def _where(self) -> str:
        return f"embedding with {self._model!r} at {self._host}"


def _decoded(embedding: Any) -> Any:
    """A row's vector: base64 little-endian float32 as asked, or the floats themselves."""
    if isinstance(embedding, str):
        try:
            return np.frombuffer(base64.b64decode(embedding, validate=True), dtype="<f4")
        except (ValueError, binascii.Error) as error:
            raise EmbeddingError(f"the server returned an undecodable vector: {error}") from None
    return embedding
