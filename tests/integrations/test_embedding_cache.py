"""The query path of the offline model: one unpadded run, and a cache of recent queries."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import pytest

from flink_agents.integrations.embeddings import LocalEmbeddingModel
from flink_agents.integrations.embeddings._cache import EmbeddingCache

TEXTS = [
    "",
    "short",
    "My sister booked a window seat for the trip in June.",
    "How do I reset my password?",
    "word " * 400,  # truncated at 256 word pieces, like the batch path
]


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.fixture(scope="module")
def local() -> LocalEmbeddingModel:
    return LocalEmbeddingModel()


def test_embed_one_equals_the_batch_path(local: LocalEmbeddingModel) -> None:
    """The single-text run gives the vector ``embed([text])[0]`` gives (up to float
    rounding), so items stored before and queries embedded now still match."""
    uncached = LocalEmbeddingModel(query_cache_size=0)
    for text in TEXTS:
        one, batch = uncached.embed_one(text), local.embed([text])[0]
        assert len(one) == 384 and all(isinstance(x, float) for x in one)
        assert cosine(one, batch) >= 0.9999
        assert max(abs(x - y) for x, y in zip(one, batch, strict=True)) <= 1e-6


def test_a_repeated_query_is_not_embedded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    model = LocalEmbeddingModel(query_cache_size=2)
    runs: list[str] = []
    real = model._embed_single
    monkeypatch.setattr(model, "_embed_single", lambda text: runs.append(text) or real(text))
    first = model.embed_one("green tea")
    first.append(99.0)  # the caller's list is its own
    again = model.embed_one("green tea")
    assert runs == ["green tea"]
    assert len(again) == 384 and again == first[:-1]
    model.embed_one("coffee")
    model.embed_one("water")  # the least recently used one ("green tea") is dropped
    model.embed_one("green tea")
    assert runs == ["green tea", "coffee", "water", "green tea"]


def test_cache_size_zero_embeds_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    model = LocalEmbeddingModel(query_cache_size=0)
    runs: list[str] = []
    real = model._embed_single
    monkeypatch.setattr(model, "_embed_single", lambda text: runs.append(text) or real(text))
    assert model.embed_one("tea") == model.embed_one("tea")
    assert runs == ["tea", "tea"]


def test_cache_keys_on_model_id_and_text() -> None:
    cache = EmbeddingCache(3)
    cache.put("m1", "tea", [1.0, 0.0])
    cache.put("m2", "tea", [0.0, 1.0])
    assert cache.get("m1", "tea") == [1.0, 0.0]
    assert cache.get("m2", "tea") == [0.0, 1.0]
    assert cache.get("m1", "coffee") is None


def test_cache_drops_the_least_recently_used() -> None:
    cache = EmbeddingCache(2)
    cache.put("m", "a", [1.0])
    cache.put("m", "b", [2.0])
    assert cache.get("m", "a") == [1.0]  # "a" is now the most recent
    cache.put("m", "c", [3.0])
    assert (cache.get("m", "a"), cache.get("m", "b"), cache.get("m", "c")) == ([1.0], None, [3.0])
    assert len(cache) == 2
    cache.clear()
    assert len(cache) == 0


def test_cache_copies_what_it_keeps_and_hands_out() -> None:
    cache = EmbeddingCache(1)
    vector = [1.0, 2.0]
    cache.put("m", "a", vector)
    vector[0] = 9.0
    got = cache.get("m", "a")
    assert got == [1.0, 2.0]
    got.append(3.0)
    assert cache.get("m", "a") == [1.0, 2.0]


def test_cache_size_is_checked_and_zero_keeps_nothing() -> None:
    with pytest.raises(ValueError):
        EmbeddingCache(-1)
    empty = EmbeddingCache(0)
    empty.put("m", "a", [1.0])
    assert empty.get("m", "a") is None and len(empty) == 0


def test_cache_shared_between_threads() -> None:
    """Racing puts and gets never exceed the bound nor hand out another text's vector."""
    cache = EmbeddingCache(50)

    def work(n: int) -> None:
        for i in range(2000):
            text = f"t{(n * 7 + i) % 120}"
            cache.put("m", text, [float(text[1:])])
            got = cache.get("m", text)
            assert got is None or got == [float(text[1:])]

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(work, range(8)))
    assert len(cache) == 50
