"""Embedding models: the offline MiniLM for real; the OpenAI client on a loopback server."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import flink_agents
from flink_agents.api import BaseEmbeddingModel, EmbeddingError
from flink_agents.integrations.embeddings import LocalEmbeddingModel, OpenAIEmbeddingModel
from flink_agents.testing.llm_server import ScriptedLLMServer

ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
SECRET = "sk-test-DoNotLeak-4f9c2e"

QUERY = "How do I reset my password?"
PARAPHRASE = "I forgot my login credentials and need a new one"
UNRELATED = [
    "The weather in Lisbon is sunny today",
    "Our quarterly revenue grew by ten percent",
    "A cat is sleeping on the sofa",
    "Add two cups of flour and stir until smooth",
]
MIXED = [
    "short",
    "",
    "A somewhat longer sentence about streaming agents running as Flink jobs.",
    QUERY,
    "word " * 400,  # longer than the 256-token limit: truncated, not an error
]


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def assert_close(a: list[list[float]], b: list[list[float]], tol: float = 1e-6) -> None:
    assert len(a) == len(b)
    for u, v in zip(a, b, strict=True):
        assert max(abs(x - y) for x, y in zip(u, v, strict=True)) <= tol


@pytest.fixture(scope="module")
def local() -> LocalEmbeddingModel:
    return LocalEmbeddingModel()


# --- the offline model ---------------------------------------------------------------------


def test_local_is_an_embedding_model(local: LocalEmbeddingModel) -> None:
    """It implements the API interface with the documented id and size."""
    assert isinstance(local, BaseEmbeddingModel)
    assert local.model_id == "local:all-MiniLM-L6-v2-int8"
    assert LocalEmbeddingModel(batch_size=4, threads=1).model_id == local.model_id
    assert local.dimension == 384


def test_paraphrase_ranks_above_unrelated(local: LocalEmbeddingModel) -> None:
    """A paraphrase sharing no keyword beats every unrelated sentence by a clear margin."""
    query = local.embed_one(QUERY)
    candidates = local.embed([*UNRELATED, PARAPHRASE])
    scores = [dot(query, vector) for vector in candidates]
    paraphrase_score = scores[-1]
    assert paraphrase_score > max(scores[:-1]) + 0.2, scores


def test_vectors_have_384_unit_length_floats(local: LocalEmbeddingModel) -> None:
    """Every vector, including the empty and the over-long text, is 384 floats of norm 1."""
    for vector in local.embed(MIXED):
        assert len(vector) == 384
        assert all(isinstance(x, float) for x in vector)
        assert math.isclose(math.sqrt(dot(vector, vector)), 1.0, abs_tol=1e-5)


def test_deterministic_across_calls(local: LocalEmbeddingModel) -> None:
    """The same texts give identical vectors on another call and on another instance."""
    first = local.embed(MIXED)
    assert local.embed(MIXED) == first
    assert LocalEmbeddingModel(batch_size=2, threads=1).embed(MIXED) == first


def test_batch_equals_one_by_one(local: LocalEmbeddingModel) -> None:
    """Batching (and the length sort behind it) does not change any vector or their order."""
    batched = LocalEmbeddingModel(batch_size=2).embed(MIXED)
    one_by_one = [local.embed_one(text) for text in MIXED]
    assert_close(batched, one_by_one)


def test_a_query_gives_the_vector_of_a_batch_of_one() -> None:
    """embed_one (on the query session) and embed (on the batch session, of two threads)
    agree on every text, with the query cache off so every call runs the model."""
    model = LocalEmbeddingModel(threads=2, query_cache_size=0)
    assert_close([model.embed_one(text) for text in MIXED], [model.embed([t])[0] for t in MIXED])


def spy_on_sessions(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(session id, its intra-op thread count) of every onnxruntime run from now on."""
    import onnxruntime

    runs: list[tuple[int, int]] = []
    run = onnxruntime.InferenceSession.run

    def spy(session: Any, *args: Any, **kwargs: Any) -> Any:
        runs.append((id(session), session.get_session_options().intra_op_num_threads))
        return run(session, *args, **kwargs)

    monkeypatch.setattr(onnxruntime.InferenceSession, "run", spy)
    return runs


def test_by_default_batches_and_queries_share_one_session_of_one_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default suits a Flink worker sharing its cores: one thread, one session."""
    runs = spy_on_sessions(monkeypatch)
    model = LocalEmbeddingModel()
    model.embed(["a text being stored"])
    model.embed_one("a query")
    assert [threads for _, threads in runs] == [1, 1]
    assert runs[0][0] == runs[1][0]


def test_queries_run_on_a_one_thread_session_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With more threads for batches, a query still runs on one intra-op thread, on a
    session of its own."""
    runs = spy_on_sessions(monkeypatch)
    model = LocalEmbeddingModel(threads=2)
    model.embed(["a text being stored"])
    model.embed_one("a query")
    (batch_session, batch_threads), (query_session, query_threads) = runs
    assert (batch_threads, query_threads) == (2, 1)
    assert batch_session != query_session


def test_query_threads_equal_to_threads_share_one_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """query_threads == threads runs both on one session (one session's memory)."""
    runs = spy_on_sessions(monkeypatch)
    model = LocalEmbeddingModel(threads=2, query_threads=2)
    model.embed(["a text being stored"])
    model.embed_one("a query")
    assert [threads for _, threads in runs] == [2, 2]
    assert runs[0][0] == runs[1][0]


def test_thread_counts_below_one_are_refused() -> None:
    """threads and query_threads take None (every core) or a count of at least one."""
    with pytest.raises(ValueError, match="query_threads"):
        LocalEmbeddingModel(query_threads=0)
    with pytest.raises(ValueError, match="threads"):
        LocalEmbeddingModel(threads=0)
    assert "query_threads=None" in repr(LocalEmbeddingModel(query_threads=None))


def test_empty_batch_and_bare_string(local: LocalEmbeddingModel) -> None:
    """An empty batch is an empty list; a bare string is refused rather than split in chars."""
    assert local.embed([]) == []
    with pytest.raises(TypeError):
        local.embed("hello")


def test_shared_between_threads() -> None:
    """Threads racing on the first call load the model once and agree on every vector."""
    model = LocalEmbeddingModel(batch_size=3)
    expected = LocalEmbeddingModel().embed(MIXED)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: model.embed(MIXED), range(8)))
    for result in results:
        assert_close(result, expected)


def test_model_files_are_installed_data(local: LocalEmbeddingModel) -> None:
    """The weights come from site-packages and the tokenizer from this package, as pinned."""
    site_packages = Path(sysconfig.get_paths()["purelib"]).resolve()
    assert local.weights_path.resolve().is_relative_to(site_packages)
    package_dir = Path(flink_agents.__file__).resolve().parent
    assert local.tokenizer_path.resolve().is_relative_to(package_dir)
    assert hashlib.sha256(local.weights_path.read_bytes()).hexdigest() == ONNX_SHA256
    assert hashlib.sha256(local.tokenizer_path.read_bytes()).hexdigest() == TOKENIZER_SHA256


OFFLINE_SCRIPT = """
import json, socket, sys

def refuse(*args, **kwargs):
    raise OSError("network access attempted")

socket.socket.connect = refuse
socket.getaddrinfo = refuse
socket.create_connection = refuse

from flink_agents.integrations.embeddings import LocalEmbeddingModel

vector = LocalEmbeddingModel().embed_one("offline")
print(json.dumps({"dimension": len(vector), "hub": "huggingface_hub" in sys.modules}))
"""


def test_loads_with_network_disabled(tmp_path: Path) -> None:
    """A fresh process with sockets disabled embeds, never touching a hub or a cache."""
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "HF_HOME": str(home / "hf"),
    }
    env.pop("ORT_DISABLE_TELEMETRY", None)  # the model must opt out by itself
    done = subprocess.run(
        [sys.executable, "-c", OFFLINE_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"dimension": 384, "hub": False}
    assert list(home.iterdir()) == []


# --- the OpenAI-compatible client ------------------------------------------------------------
# Plumbing runs against the project's scripted stand-in; what it cannot show (headers, rows out
# of order, raw vectors, an error that echoes the key) against the small server below.


@pytest.fixture
def scripted() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(embedding_dim=8) as server:
        yield server


def test_openai_embeds_over_http(scripted: ScriptedLLMServer) -> None:
    """One request per batch; unit vectors of the server's size, deterministic per text."""
    model = OpenAIEmbeddingModel(
        model="embed-small", base_url=scripted.base_url, api_key=SECRET, dimension=8
    )
    vectors = model.embed(["alpha", "beta", "gamma"])
    assert scripted.call_count("embeddings") == 1
    assert scripted.calls[0].request["encoding_format"] == "base64"  # a quarter of the bytes
    assert "dimensions" not in scripted.calls[0].request
    assert [len(v) for v in vectors] == [8, 8, 8]
    for vector in vectors:
        assert math.isclose(math.sqrt(dot(vector, vector)), 1.0, abs_tol=1e-9)
    assert model.embed_one("beta") == vectors[1]
    assert model.embed([]) == []
    assert scripted.call_count("embeddings") == 2
    assert model.model_id == "openai:embed-small@127.0.0.1"


def test_openai_reads_floats_from_a_server_that_ignores_base64(scripted: ScriptedLLMServer) -> None:
    """Some compatible servers answer floats whatever was asked: the same vectors come out."""
    from flink_agents.integrations.embeddings import _openai

    model = OpenAIEmbeddingModel(model="embed-small", base_url=scripted.base_url, dimension=8)
    packed = model.embed(["alpha beta"])
    floats = [_openai._decoded(list(packed[0]))]  # a row of floats passes through as it is
    [again] = model._vectors(floats, 1)
    assert all(math.isclose(a, b, abs_tol=1e-12) for a, b in zip(again, packed[0], strict=True))
    with pytest.raises(EmbeddingError, match="undecodable"):
        _openai._decoded("not base64!")


def test_openai_splits_large_batches(scripted: ScriptedLLMServer) -> None:
    """More than 256 texts go out as several requests and come back in order."""
    model = OpenAIEmbeddingModel(model="embed-small", base_url=scripted.base_url, api_key=SECRET)
    texts = [f"text number{i}" for i in range(300)]
    vectors = model.embed(texts)
    assert [len(call.request["input"]) for call in scripted.calls] == [256, 44]
    assert vectors[299] == model.embed_one("text number299")
    assert vectors[0] != vectors[299]


def test_openai_shortens_text_embedding_3(scripted: ScriptedLLMServer) -> None:
    """A smaller dimension for text-embedding-3 is sent to the server and marks the model id."""
    model = OpenAIEmbeddingModel(base_url=scripted.base_url, api_key=SECRET, dimension=16)
    assert model.dimension == 16
    assert len(model.embed_one("x")) == 16
    assert scripted.calls[0].request["dimensions"] == 16
    assert model.model_id == "openai:text-embedding-3-small@127.0.0.1?dimensions=16"
    native = OpenAIEmbeddingModel(base_url=scripted.base_url, api_key=SECRET)
    assert native.dimension == 1536
    assert native.model_id == "openai:text-embedding-3-small@127.0.0.1"


def test_openai_learns_unknown_dimension(scripted: ScriptedLLMServer) -> None:
    """An unknown model's size is asked of the server once, then checked on every response."""
    model = OpenAIEmbeddingModel(model="nomic-embed-text", base_url=scripted.base_url)
    assert model.dimension == 8
    assert model.dimension == 8
    assert scripted.call_count("embeddings") == 1
    wrong = OpenAIEmbeddingModel(model="nomic-embed-text", base_url=scripted.base_url, dimension=4)
    with pytest.raises(EmbeddingError, match="expected 4-dimensional"):
        wrong.embed(["x"])


def test_openai_retries_then_succeeds(scripted: ScriptedLLMServer) -> None:
    """A 429 is retried by the client within max_retries; past them it is an EmbeddingError."""
    scripted.fail_next(1, status=429)
    model = OpenAIEmbeddingModel(
        model="embed-small", base_url=scripted.base_url, api_key=SECRET, max_retries=1
    )
    assert len(model.embed_one("x")) == 8
    assert scripted.call_count("embeddings") == 2
    scripted.fail_next(2, status=500)
    with pytest.raises(EmbeddingError, match="HTTP 500"):
        model.embed_one("x")


def test_openai_without_key_for_openai_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenAI's own endpoint with no key fails at construction, not at the first request."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        OpenAIEmbeddingModel()


def test_openai_connection_error_is_an_embedding_error() -> None:
    """A server that is not there surfaces as EmbeddingError after the retries."""
    with ScriptedLLMServer() as gone:
        base_url = gone.base_url
    model = OpenAIEmbeddingModel(base_url=base_url, api_key=SECRET, max_retries=0, timeout=5)
    with pytest.raises(EmbeddingError, match="APIConnectionError"):
        model.embed(["x"])


class RawServer:
    """A loopback embeddings route that records headers, returns raw (not unit) vectors in
    reverse order, and answers queued ``(status, body)`` failures first."""

    def __init__(self, dimension: int = 8) -> None:
        self.dimension = dimension
        self.requests: list[dict[str, Any]] = []
        self.failures: list[tuple[int, dict[str, Any]]] = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def vector(self, text: str) -> list[float]:
        digest = hashlib.sha256(text.encode()).digest()
        return [3.0 * (digest[i] - 127.5) for i in range(self.dimension)]

    def reply(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        self.requests.append({"body": body, "headers": headers})
        if self.failures:
            return self.failures.pop(0)
        rows = [
            {"object": "embedding", "index": i, "embedding": self.vector(text)}
            for i, text in enumerate(body["input"])
        ]
        return 200, {"object": "list", "data": rows[::-1], "model": body["model"]}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, payload = server.reply(body, headers)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def __enter__(self) -> RawServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def raw() -> Iterator[RawServer]:
    with RawServer() as server:
        yield server


def test_openai_orders_and_normalises_rows(raw: RawServer) -> None:
    """Rows are put back in input order by index and scaled to unit length."""
    model = OpenAIEmbeddingModel(model="embed-small", base_url=raw.base_url, api_key=SECRET)
    texts = ["alpha", "beta", "gamma"]
    for text, vector in zip(texts, model.embed(texts), strict=True):
        expected = raw.vector(text)
        norm = math.sqrt(dot(expected, expected))
        assert_close([vector], [[x / norm for x in expected]], tol=1e-9)
    assert raw.requests[0]["headers"]["authorization"] == f"Bearer {SECRET}"


def test_openai_reads_environment(raw: RawServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """OPENAI_API_KEY and OPENAI_BASE_URL stand in for missing arguments."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", raw.base_url)
    OpenAIEmbeddingModel(model="embed-small").embed(["x"])
    assert raw.requests[0]["headers"]["authorization"] == f"Bearer {SECRET}"
    monkeypatch.delenv("OPENAI_API_KEY")
    OpenAIEmbeddingModel(model="embed-small").embed(["x"])  # a keyless local server is fine
    assert raw.requests[1]["headers"]["authorization"] == "Bearer no-key"


def test_api_key_never_leaks(raw: RawServer) -> None:
    """Neither repr/str nor an error (even one echoing the key) carries the API key."""
    model = OpenAIEmbeddingModel(
        model="embed-small", base_url=raw.base_url, api_key=SECRET, max_retries=0
    )
    assert SECRET not in repr(model)
    assert SECRET not in str(model)
    assert "embed-small" in repr(model)
    raw.failures.append((401, {"error": {"message": f"Incorrect API key provided: {SECRET}"}}))
    with pytest.raises(EmbeddingError) as caught:
        model.embed(["x"])
    assert SECRET not in str(caught.value)
    assert "HTTP 401" in str(caught.value)
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None


def test_a_response_that_is_not_embeddings_is_an_embedding_error(raw: RawServer) -> None:
    """A 200 answer without rows (another route's body, a proxy's page) is a clear error."""
    model = OpenAIEmbeddingModel(
        model="embed-small", base_url=raw.base_url, api_key=SECRET, max_retries=0
    )
    raw.failures.append((200, {"object": "list", "results": []}))
    raw.failures.append((200, {"object": "list", "data": [{"embedding": "AAAA"}]}))
    for _ in range(2):
        with pytest.raises(EmbeddingError, match="not a list of embeddings"):
            model.embed(["x"])
    assert len(model.embed(["x"])[0]) == raw.dimension
