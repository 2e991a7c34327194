"""The conformance suite: one spec per ``VectorStore`` behaviour, run against every backend."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from flink_agents.integrations.vector_stores import (
    DEFAULT_INDEXES,
    CollectionMismatchError,
    CollectionNotFoundError,
    FieldMatch,
    FieldMatchAny,
    FieldRange,
    FieldType,
    Filter,
    HasId,
    OrderBy,
    Point,
    VectorStore,
    VectorStoreError,
    point_id,
)
from tests.integrations.vector_stores.conftest import DIM, MODEL, Backend, unit

KEYS = ("user-1", "user-2", "user-3")


def item(n: int, **payload: Any) -> Point:
    """Point ``n``: key cycles over ``KEYS``, created_time 1000 + n, tags by divisibility."""
    body: dict[str, Any] = {
        "key": KEYS[n % len(KEYS)],
        "set": "chat",
        "created_time": 1000.0 + n,
        "tags": [t for t, d in (("even", 2), ("three", 3), ("five", 5)) if n % d == 0],
        "kind": "item",
        "n": n,
    }
    body.update(payload)
    return Point(point_id("item", n), unit(1.0, n / 10, (n % 3) / 5), body)


def fill(store: VectorStore, coll: str, count: int = 12) -> list[Point]:
    points = [item(n) for n in range(count)]
    store.upsert(coll, points)
    return points


def ns(records: Any) -> list[int]:
    return [r.payload["n"] for r in records]


# -- writes and reads ----------------------------------------------------------------------


def test_get_returns_requested_points_in_order(store: VectorStore, coll: str) -> None:
    """get returns the listed ids in their order, omits missing ones, repeats none."""
    points = fill(store, coll)
    missing = point_id("nobody")
    wanted = [points[5].id, missing, points[1].id, points[5].id.upper()]
    got = store.get(coll, wanted)
    assert [r.id for r in got] == [points[5].id, points[1].id]
    assert got[0].payload == dict(points[5].payload)
    assert got[0].vector is None
    assert store.get(coll, []) == []


def test_get_with_vectors_returns_the_stored_vector(store: VectorStore, coll: str) -> None:
    """with_vectors=True returns each vector (normalised input comes back unchanged)."""
    points = fill(store, coll, 3)
    (record,) = store.get(coll, [points[2].id], with_vectors=True)
    assert record.vector == pytest.approx(list(points[2].vector), abs=1e-6)


def test_upsert_with_same_id_overwrites(store: VectorStore, coll: str) -> None:
    """Upserting an existing id replaces its vector and whole payload; the count is unchanged."""
    fill(store, coll, 6)
    replay = Point(point_id("item", 2), unit(0, 0, 0, 1), {"key": "user-9", "note": "again"})
    store.upsert(coll, [replay])
    store.upsert(coll, [replay])
    assert store.count(coll) == 6
    (record,) = store.get(coll, [replay.id])
    assert record.payload == {"key": "user-9", "note": "again"}
    assert store.search(coll, unit(0, 0, 0, 1), 1)[0].id == replay.id


def test_set_payload_merges_fields_and_keeps_the_vector(store: VectorStore, coll: str) -> None:
    """set_payload changes the given fields of the given points only; vectors stay."""
    fill(store, coll, 6)
    ids = [point_id("item", 1), point_id("item", 2)]
    before = {r.id: r for r in store.get(coll, [*ids, point_id("item", 3)], with_vectors=True)}
    store.set_payload(coll, ids, {"seen": 42.5, "note": "read"})
    after = {r.id: r for r in store.get(coll, [*ids, point_id("item", 3)], with_vectors=True)}
    for i in ids:
        assert after[i].payload == {**before[i].payload, "seen": 42.5, "note": "read"}
        assert after[i].vector == pytest.approx(before[i].vector)
    untouched = point_id("item", 3)
    assert after[untouched].payload == before[untouched].payload
    assert store.count(coll) == 6
    store.set_payload(coll, [], {"seen": 1})  # nothing to do


def test_payload_round_trips(store: VectorStore, coll: str) -> None:
    """Nested objects, lists, None, bools and unicode come back as they went in."""
    payload = {"key": "k", "value": {"a": [1, None, True, 2.5], "é": "ünï"}, "none": None}
    store.upsert(coll, [Point(point_id("p"), unit(1), payload)])
    assert store.get(coll, [point_id("p")])[0].payload == payload


def test_upsert_nothing_is_a_no_op(store: VectorStore, coll: str) -> None:
    """An empty upsert writes nothing and does not fail."""
    store.upsert(coll, [])
    assert store.count(coll) == 0


def test_concurrent_upserts_lose_nothing(store: VectorStore, coll: str) -> None:
    """Upserts from four threads at once all land (qdrant-client local mode needs the lock)."""
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            for n in range(150):
                store.upsert(coll, [item(worker * 1000 + n)])
                if n % 10 == 0:
                    store.count(coll)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert store.count(coll) == 600


# -- search --------------------------------------------------------------------------------


def test_search_ranks_by_cosine_similarity(store: VectorStore, coll: str) -> None:
    """The nearest point comes first and scores descend; an exact match scores ~1."""
    points = fill(store, coll)
    hits = store.search(coll, points[7].vector, limit=5)
    assert hits[0].id == points[7].id
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert len(hits) == 5
    assert hits[0].payload["n"] == 7


def test_search_filtered_by_key_returns_only_that_key(store: VectorStore, coll: str) -> None:
    """A key filter isolates one key even when other keys' points are nearer."""
    points = fill(store, coll)
    probe = points[7].vector  # n=7 belongs to user-2
    hits = store.search(coll, probe, limit=10, filter=Filter(must=[FieldMatch("key", "user-1")]))
    assert {h.payload["key"] for h in hits} == {"user-1"}
    assert sorted(ns(hits)) == [0, 3, 6, 9]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    unfiltered = store.search(coll, probe, limit=1)
    assert unfiltered[0].payload["key"] == "user-2"


def test_search_limit_and_score_threshold(store: VectorStore, coll: str) -> None:
    """limit caps the hits; score_threshold drops weaker ones; limit 0 returns nothing."""
    points = fill(store, coll)
    assert len(store.search(coll, points[0].vector, limit=3)) == 3
    strict = store.search(coll, points[0].vector, limit=12, score_threshold=0.999)
    assert [h.id for h in strict] == [points[0].id]
    assert store.search(coll, points[0].vector, limit=0) == []


def test_search_combines_filters(store: VectorStore, coll: str) -> None:
    """must, should and must_not combine, and filters nest."""
    fill(store, coll)
    flt = Filter(
        must=[FieldMatch("set", "chat")],
        should=[FieldMatch("key", "user-1"), FieldMatch("key", "user-2")],
        must_not=[Filter(must=[FieldMatchAny("tags", ["even"])])],
    )
    hits = store.search(coll, unit(1), limit=12, filter=flt)
    assert sorted(ns(hits)) == [1, 3, 7, 9]


# -- filters -------------------------------------------------------------------------------


def test_tags_any_match_and_all_match(store: VectorStore, coll: str) -> None:
    """FieldMatchAny matches a point with any listed tag; two FieldMatch need both."""
    fill(store, coll)
    anyof = Filter(must=[FieldMatchAny("tags", ["three", "five"])])
    assert sorted(ns(store.scroll(coll, anyof))) == [0, 3, 5, 6, 9, 10]
    both = Filter(must=[FieldMatch("tags", "even"), FieldMatch("tags", "three")])
    assert sorted(ns(store.scroll(coll, both))) == [0, 6]
    assert store.count(coll, Filter(must=[FieldMatchAny("tags", [])])) == 0


def test_time_range(store: VectorStore, coll: str) -> None:
    """FieldRange bounds are inclusive (gte/lte) or exclusive (gt/lt) as named."""
    fill(store, coll)
    half_open = Filter(must=[FieldRange("created_time", gte=1003.0, lt=1006.0)])
    assert sorted(ns(store.scroll(coll, half_open))) == [3, 4, 5]
    closed = Filter(must=[FieldRange("created_time", gt=1003.0, lte=1006.0)])
    assert sorted(ns(store.scroll(coll, closed))) == [4, 5, 6]
    assert store.count(coll, Filter(must=[FieldRange("created_time", gte=1010.5)])) == 1


def test_match_integer_and_ids(store: VectorStore, coll: str) -> None:
    """FieldMatch on an int field and HasId select exactly those points."""
    points = fill(store, coll)
    assert ns(store.scroll(coll, Filter(must=[FieldMatch("n", 4)]))) == [4]
    by_id = Filter(must=[HasId([points[2].id, points[8].id])])
    assert sorted(ns(store.scroll(coll, by_id))) == [2, 8]


def test_empty_filter_matches_everything(store: VectorStore, coll: str) -> None:
    """Filter() behaves like no filter."""
    fill(store, coll, 5)
    assert store.count(coll, Filter()) == 5
    assert len(store.search(coll, unit(1), 10, Filter())) == 5


# -- scroll and count ----------------------------------------------------------------------


def test_scroll_orders_ascending_and_descending(store: VectorStore, coll: str) -> None:
    """order_by sorts by the field both ways; limit keeps the first ones of that order."""
    fill(store, coll)
    mine = Filter(must=[FieldMatch("key", "user-2")])
    newest = store.scroll(coll, mine, limit=2, order_by=OrderBy("created_time", descending=True))
    assert ns(newest) == [10, 7]
    oldest = store.scroll(coll, mine, limit=3, order_by="created_time")
    assert ns(oldest) == [1, 4, 7]
    assert ns(store.scroll(coll, order_by=OrderBy("n", descending=True))) == list(range(11, -1, -1))


def test_scroll_without_limit_returns_every_match(store: VectorStore, coll: str) -> None:
    """limit=None pages through everything (pages are tiny in these tests)."""
    fill(store, coll)
    assert sorted(ns(store.scroll(coll))) == list(range(12))
    first = ns(store.scroll(coll, limit=5))
    assert len(set(first)) == 5
    assert ns(store.scroll(coll, order_by="created_time")) == list(range(12))
    assert store.scroll(coll, limit=0) == []


def test_scroll_with_vectors(store: VectorStore, coll: str) -> None:
    """with_vectors=True fills Record.vector in scroll too."""
    points = fill(store, coll, 2)
    records = store.scroll(coll, order_by="created_time", with_vectors=True)
    assert records[1].vector == pytest.approx(list(points[1].vector), abs=1e-6)


def test_scroll_order_by_needs_an_orderable_index(store: VectorStore, coll: str) -> None:
    """Ordering by a keyword or unindexed field is refused the same way on every backend."""
    fill(store, coll, 3)
    for field in ("key", "unindexed"):
        with pytest.raises(ValueError, match="float or integer index"):
            store.scroll(coll, order_by=field)


def test_count_with_filter(store: VectorStore, coll: str) -> None:
    """count is exact, with or without a filter."""
    fill(store, coll)
    assert store.count(coll) == 12
    assert store.count(coll, Filter(must=[FieldMatch("key", "user-3")])) == 4
    assert store.count(coll, Filter(must_not=[FieldMatch("key", "user-3")])) == 8


# -- delete --------------------------------------------------------------------------------


def test_delete_by_ids(store: VectorStore, coll: str) -> None:
    """Listed ids go, unknown ids are ignored, the rest stays."""
    points = fill(store, coll)
    store.delete(coll, ids=[points[0].id, points[1].id, point_id("never")])
    assert store.count(coll) == 10
    assert store.get(coll, [points[0].id, points[2].id])[0].id == points[2].id
    store.delete(coll, ids=[])
    assert store.count(coll) == 10


def test_delete_by_filter(store: VectorStore, coll: str) -> None:
    """A filter deletes exactly its matches; Filter() deletes everything."""
    fill(store, coll)
    store.delete(coll, filter=Filter(must=[FieldMatch("key", "user-1")]))
    assert store.count(coll) == 8
    assert store.count(coll, Filter(must=[FieldMatch("key", "user-1")])) == 0
    store.delete(coll, filter=Filter())
    assert store.count(coll) == 0


def test_delete_by_ids_and_filter(store: VectorStore, coll: str) -> None:
    """With both, only the listed ids that also match the filter go."""
    points = fill(store, coll)
    store.delete(coll, ids=[p.id for p in points[:6]], filter=Filter(must=[FieldMatch("n", 4)]))
    assert sorted(ns(store.scroll(coll))) == [0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11]


def test_delete_needs_ids_or_filter(store: VectorStore, coll: str) -> None:
    """delete() with neither refuses rather than guessing."""
    fill(store, coll, 2)
    with pytest.raises(ValueError, match="ids, a filter"):
        store.delete(coll)
    assert store.count(coll) == 2


# -- collections ---------------------------------------------------------------------------


def test_ensure_collection_is_idempotent(backend: Backend, store: VectorStore, coll: str) -> None:
    """Ensuring again keeps the points and adds only new indexes."""
    fill(store, coll, 3)
    store.ensure_collection(coll, DIM, MODEL)
    store.ensure_collection(coll, DIM, MODEL, indexes={"rank": FieldType.FLOAT})
    assert store.count(coll) == 3
    store.upsert(coll, [item(50, rank=2.0), item(51, rank=1.0)])
    assert ns(store.scroll(coll, order_by="rank")) == [51, 50]


def test_dimension_mismatch_is_refused(store: VectorStore, coll: str) -> None:
    """An existing collection refuses another dimension, and vectors of another length."""
    with pytest.raises(CollectionMismatchError, match="4-dimensional"):
        store.ensure_collection(coll, DIM + 1, MODEL)
    with pytest.raises(ValueError, match="4-dimensional"):
        store.upsert(coll, [Point(point_id("x"), [1.0, 0.0], {})])
    with pytest.raises(ValueError, match="4-dimensional"):
        store.search(coll, [1.0, 0.0, 0.0], limit=1)


def test_vectors_of_any_number_type_are_stored_as_floats(store: VectorStore, coll: str) -> None:
    """A vector may be a list of ints, a tuple or a numpy array; it reads back as floats. A
    vector holding something other than numbers is a ValueError, and nothing is written."""
    store.upsert(
        coll,
        [
            Point(point_id("ints"), [0, 1, 0, 0], {"n": 1}),
            Point(point_id("tuple"), (0.0, 0.0, 1.0, 0.0), {"n": 2}),
            Point(point_id("numpy"), np.array([0, 0, 0, 1], dtype=np.float32), {"n": 3}),
        ],
    )
    records = store.get(coll, [point_id(n) for n in ("ints", "tuple", "numpy")], with_vectors=True)
    assert [r.vector for r in records] == [unit(0, 1, 0, 0), unit(0, 0, 1, 0), unit(0, 0, 0, 1)]
    assert all(type(x) is float for r in records for x in r.vector or [])
    with pytest.raises(ValueError):
        store.upsert(coll, [Point(point_id("bad"), [1.0, "up", 0.0, 0.0], {})])
    assert store.count(coll) == 3


def test_model_mismatch_is_refused(store: VectorStore, coll: str) -> None:
    """An existing collection refuses another embedding model of the same dimension."""
    with pytest.raises(CollectionMismatchError, match="test:model-b"):
        store.ensure_collection(coll, DIM, "test:model-b")


def test_index_retype_is_refused(store: VectorStore, coll: str) -> None:
    """A field indexed as one type cannot be asked for as another."""
    with pytest.raises(CollectionMismatchError, match="'n'"):
        store.ensure_collection(coll, DIM, MODEL, indexes={"n": FieldType.FLOAT})
    with pytest.raises(ValueError, match="always indexed"):
        store.ensure_collection(coll, DIM, MODEL, indexes={"key": FieldType.INTEGER})


def test_unknown_collection_raises_not_found(backend: Backend, store: VectorStore) -> None:
    """Every point operation names a missing collection with CollectionNotFoundError."""
    name = backend.new_name()
    calls = [
        lambda: store.upsert(name, [item(1)]),
        lambda: store.get(name, [point_id("x")]),
        lambda: store.search(name, unit(1), 1),
        lambda: store.scroll(name),
        lambda: store.count(name),
        lambda: store.delete(name, filter=Filter()),
        lambda: store.collection_info(name),
    ]
    for call in calls:
        with pytest.raises(CollectionNotFoundError, match=name):
            call()


def test_collections_and_drop(backend: Backend, store: VectorStore, coll: str) -> None:
    """collections lists ensured collections; drop removes one and reports whether it existed."""
    other = backend.new_name()
    store.ensure_collection(other, 2, "test:other")
    fill(store, coll, 2)
    assert {coll, other} <= set(store.collections())
    assert store.drop_collection(other) is True
    assert store.drop_collection(other) is False
    assert other not in store.collections()
    assert store.count(coll) == 2
    store.ensure_collection(other, 3, "test:third")  # the name is free again
    assert store.collection_info(other).dimension == 3


def test_collection_info_and_payload_indexes(
    backend: Backend, store: VectorStore, coll: str
) -> None:
    """Info reports the recorded model and count; the engine holds the default indexes."""
    fill(store, coll, 4)
    info = store.collection_info(coll)
    assert (info.name, info.dimension, info.model_id, info.points) == (coll, DIM, MODEL, 4)
    if not backend.inspectable_indexes:
        pytest.skip("qdrant-client local mode keeps no payload indexes to inspect")
    assert info.indexes == {**DEFAULT_INDEXES, "n": FieldType.INTEGER}


def test_a_fresh_store_sees_earlier_data(backend: Backend, store: VectorStore, coll: str) -> None:
    """A new store object over the same data (edge: same directory, after close) has it all."""
    points = fill(store, coll, 5)
    store.close()
    again = backend.open()
    assert again.count(coll) == 5
    assert again.get(coll, [points[3].id])[0].payload["n"] == 3
    assert ns(again.scroll(coll, order_by=OrderBy("created_time", descending=True), limit=1)) == [4]
    with pytest.raises(CollectionMismatchError):
        again.ensure_collection(coll, DIM, "test:model-b")


def test_invalid_arguments_are_refused(store: VectorStore, coll: str) -> None:
    """Bad ids, names, dimensions and limits raise ValueError before touching the engine."""
    with pytest.raises(ValueError, match="UUID"):
        store.upsert(coll, [Point("not-a-uuid", unit(1), {})])
    with pytest.raises(ValueError, match="collection name"):
        store.ensure_collection("../escape", DIM, MODEL)
    with pytest.raises(ValueError, match="dimension"):
        store.ensure_collection("fine", 0, MODEL)
    with pytest.raises(ValueError, match="model_id"):
        store.ensure_collection("fine", DIM, "")
    with pytest.raises(ValueError, match="limit"):
        store.search(coll, unit(1), -1)


def test_closed_store_refuses_calls(store: VectorStore, coll: str) -> None:
    """After close, calls fail with VectorStoreError; close is idempotent."""
    store.close()
    store.close()
    with pytest.raises(VectorStoreError, match="closed"):
        store.ensure_collection(coll, DIM, MODEL)
