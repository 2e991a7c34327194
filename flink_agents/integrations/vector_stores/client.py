"""The server backend: a Qdrant server through qdrant-client (production, shared by processes).

``QdrantClientVectorStore(url=..., api_key=...)`` talks to a server; tests hand it
``client=QdrantClient(":memory:")``, qdrant-client's local mode, which runs the same code
path on small data. Local mode differs, as measured with qdrant-client 1.20:

- it is not thread-safe (points were lost with 4 writer threads), so this store serializes
  every call with a lock in local mode; the server mode goes unlocked (its HTTP and gRPC
  clients are thread-safe);
- it ignores payload indexes (and warns on creating one), so none are created there and
  ``collection_info().indexes`` is empty; it filters by scanning, fine for small data only
  (p95 ~1.7 s at 100k points);
- ``scroll(order_by=...)`` works there without an index; this store still requires the
  float/integer index it needs on a server, so both modes accept the same calls.

The embedding model and dimension are recorded in the collection's ``metadata`` (Qdrant 1.16+
servers keep it). A collection made by someone else, without that record, is refused rather
than guessed at. The record is cached per store: a collection dropped and re-created by
another process under the same name is not noticed until this store drops it or is reopened.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from qdrant_client import QdrantClient, models

from flink_agents.integrations.vector_stores._base import (
    CollectionInfo,
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
    Record,
    ScoredRecord,
    VectorStore,
    VectorStoreError,
    active,
    canonical_id,
    check_creation_args,
    check_limit,
    check_mismatch,
    check_vector,
    merged_indexes,
    order_field,
    unique_ids,
    validate_collection_name,
)

METADATA_KEY = "flink_agents"
"""The key of this store's record inside a collection's metadata."""
FORMAT_VERSION = 1
SCROLL_PAGE = 1024

_TO_CLIENT = {
    FieldType.KEYWORD: models.PayloadSchemaType.KEYWORD,
    FieldType.INTEGER: models.PayloadSchemaType.INTEGER,
    FieldType.FLOAT: models.PayloadSchemaType.FLOAT,
}
_FROM_CLIENT = {native.value: kind for kind, native in _TO_CLIENT.items()}


@dataclass
class _Meta:
    dimension: int
    model_id: str
    indexes: dict[str, FieldType]

    def record(self) -> dict[str, Any]:
        return {
            METADATA_KEY: {
                "format": FORMAT_VERSION,
                "dimension": self.dimension,
                "model_id": self.model_id,
                "indexes": {field: str(kind) for field, kind in sorted(self.indexes.items())},
            }
        }


class QdrantClientVectorStore(VectorStore):
    """A ``VectorStore`` on a Qdrant server, or on qdrant-client's local mode for tests.

    Args:
        url: the server, e.g. ``http://localhost:6333``; ``":memory:"`` for local mode.
        api_key: the server's API key, if it wants one.
        client: an existing client to use instead of ``url`` (not closed by ``close``).
        **options: passed to ``QdrantClient`` with ``url`` (``timeout``, ``prefer_grpc``...).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        api_key: str | None = None,
        client: QdrantClient | None = None,
        **options: Any,
    ) -> None:
        if (url is None) == (client is None):
            raise ValueError("pass either url= (a Qdrant server or ':memory:') or client=")
        self._owns_client = client is None
        if client is None:
            if url == ":memory:":
                client = QdrantClient(location=":memory:", **options)
            else:
                client = QdrantClient(url=url, api_key=api_key, **options)
        self._client = client
        init = client.init_options
        self.local = init.get("location") == ":memory:" or init.get("path") is not None
        """True in qdrant-client's local mode (no server): calls are then serialized."""
        self._call_lock = threading.RLock()
        self._meta_lock = threading.Lock()
        self._meta: dict[str, _Meta] = {}
        self._closed = False

    # -- collections ------------------------------------------------------------------------

    def ensure_collection(
        self,
        name: str,
        dimension: int,
        model_id: str,
        indexes: Mapping[str, FieldType | str] | None = None,
    ) -> None:
        check_creation_args(name, dimension, model_id)
        wanted = merged_indexes(indexes)
        meta = self._fetch(name)
        if meta is None:
            created = _Meta(dimension, model_id, dict(wanted))
            try:
                with self._engine(name):
                    self._client.create_collection(
                        name,
                        vectors_config=models.VectorParams(
                            size=dimension, distance=models.Distance.COSINE
                        ),
                        metadata=created.record(),
                    )
            except VectorStoreError:
                meta = self._fetch(name)  # another process created it first
                if meta is None:
                    raise
            else:
                meta = created
        check_mismatch(name, dimension, model_id, meta.dimension, meta.model_id)
        self._add_indexes(name, meta, wanted)
        with self._meta_lock:
            self._meta[name] = meta

    def drop_collection(self, name: str) -> bool:
        validate_collection_name(name)
        with self._meta_lock:
            self._meta.pop(name, None)
        with self._engine(name):
            if not self._client.collection_exists(name):
                return False
            self._client.delete_collection(name)
        return True

    def collections(self) -> list[str]:
        """Every collection on the server, this store's or not."""
        with self._engine("*"):
            return sorted(c.name for c in self._client.get_collections().collections)

    def collection_info(self, name: str) -> CollectionInfo:
        meta = self._get(name)
        with self._engine(name):
            schema = self._client.get_collection(name).payload_schema or {}
            points = self._client.count(name, exact=True).count
        indexes = {
            field: _FROM_CLIENT[_schema_type(info)]
            for field, info in schema.items()
            if _schema_type(info) in _FROM_CLIENT
        }
        return CollectionInfo(name, meta.dimension, meta.model_id, points, indexes)

    def close(self) -> None:
        with self._call_lock:
            if self._closed:
                return
            self._closed = True
            if self._owns_client:
                self._client.close()

    # -- points -----------------------------------------------------------------------------

    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        meta = self._get(collection)
        native = [
            models.PointStruct(
                id=canonical_id(p.id),
                vector=check_vector(collection, p.vector, meta.dimension),
                payload=dict(p.payload),
            )
            for p in points
        ]
        if native:
            with self._engine(collection):
                self._client.upsert(collection, points=native, wait=True)

    def set_payload(self, collection: str, ids: Sequence[str], payload: Mapping[str, Any]) -> None:
        self._get(collection)
        wanted = unique_ids(ids)
        if not wanted:
            return
        with self._engine(collection):
            self._client.set_payload(collection, dict(payload), points=wanted, wait=True)

    def get(
        self, collection: str, ids: Sequence[str], *, with_vectors: bool = False
    ) -> list[Record]:
        self._get(collection)
        wanted = unique_ids(ids)
        if not wanted:
            return []
        with self._engine(collection):
            found = self._client.retrieve(
                collection, wanted, with_payload=True, with_vectors=with_vectors
            )
        by_id = {canonical_id(str(r.id)): _record(r, with_vectors) for r in found}
        return [by_id[i] for i in wanted if i in by_id]

    def search(
        self,
        collection: str,
        vector: Sequence[float],
        limit: int,
        filter: Filter | None = None,
        *,
        score_threshold: float | None = None,
    ) -> list[ScoredRecord]:
        meta = self._get(collection)
        query = check_vector(collection, vector, meta.dimension)
        if check_limit(limit) == 0:
            return []
        with self._engine(collection):
            hits = self._client.query_points(
                collection,
                query=query,
                query_filter=_native(filter),
                limit=limit,
                with_payload=True,
                score_threshold=score_threshold,
            ).points
        return [
            ScoredRecord(canonical_id(str(h.id)), dict(h.payload or {}), float(h.score))
            for h in hits
        ]

    def scroll(
        self,
        collection: str,
        filter: Filter | None = None,
        limit: int | None = None,
        order_by: OrderBy | str | None = None,
        *,
        with_vectors: bool = False,
    ) -> list[Record]:
        meta = self._get(collection)
        order = order_field(collection, order_by, meta.indexes)
        if limit is not None and check_limit(limit) == 0:
            return []
        native = _native(filter)
        with self._engine(collection):
            if order is not None:
                # A server does not page ordered scrolls by offset: fetch all wanted at once.
                wanted = limit
                if wanted is None:
                    wanted = self._client.count(collection, count_filter=native, exact=True).count
                if wanted == 0:
                    return []
                direction = models.Direction.DESC if order.descending else models.Direction.ASC
                found, _ = self._client.scroll(
                    collection,
                    scroll_filter=native,
                    limit=wanted,
                    order_by=models.OrderBy(key=order.field, direction=direction),
                    with_payload=True,
                    with_vectors=with_vectors,
                )
            else:
                found = self._scroll_pages(collection, native, limit, with_vectors)
        return [_record(r, with_vectors) for r in found]

    def count(self, collection: str, filter: Filter | None = None) -> int:
        self._get(collection)
        with self._engine(collection):
            return self._client.count(collection, count_filter=_native(filter), exact=True).count

    def delete(
        self, collection: str, ids: Sequence[str] | None = None, filter: Filter | None = None
    ) -> None:
        if ids is None and filter is None:
            raise ValueError("delete needs ids, a filter or both (Filter() deletes everything)")
        self._get(collection)
        selector: Any
        if ids is not None:
            wanted = unique_ids(ids)
            if not wanted:
                return
            if active(filter) is None:
                selector = models.PointIdsList(points=list(wanted))
            else:
                both = Filter(must=[HasId(wanted), filter])
                selector = models.FilterSelector(filter=_client_filter(both))
        else:
            assert filter is not None
            selector = models.FilterSelector(filter=_client_filter(filter))
        with self._engine(collection):
            self._client.delete(collection, points_selector=selector, wait=True)

    # -- internals --------------------------------------------------------------------------

    @contextmanager
    def _engine(self, collection: str) -> Iterator[None]:
        """Serialize calls in local mode; turn the client's errors into ``VectorStoreError``."""
        guard = self._call_lock if self.local else contextlib.nullcontext()
        with guard:
            if self._closed:
                raise VectorStoreError("vector store is closed")
            try:
                yield
            except VectorStoreError:
                raise
            except Exception as error:
                raise VectorStoreError(f"collection {collection!r}: {error}") from error

    def _get(self, name: str) -> _Meta:
        meta = self._meta.get(name)
        if meta is not None:
            return meta
        validate_collection_name(name)
        meta = self._fetch(name)
        if meta is None:
            raise CollectionNotFoundError(
                f"collection {name!r} does not exist (create it with ensure_collection)"
            )
        with self._meta_lock:
            self._meta[name] = meta
        return meta

    def _fetch(self, name: str) -> _Meta | None:
        """The collection's record as stored, or None if the collection does not exist."""
        with self._engine(name):
            if not self._client.collection_exists(name):
                return None
            config = self._client.get_collection(name).config
        record = (config.metadata or {}).get(METADATA_KEY)
        vectors = config.params.vectors
        if not isinstance(vectors, models.VectorParams):
            raise CollectionMismatchError(
                f"collection {name!r} uses named vectors; this store needs one unnamed vector"
            )
        if not isinstance(record, dict) or record.get("format") != FORMAT_VERSION:
            raise CollectionMismatchError(
                f"collection {name!r} has no flink_agents record of its embedding model "
                f"(metadata[{METADATA_KEY!r}]); it was made by something else or by another "
                "version: use another collection name"
            )
        if vectors.distance != models.Distance.COSINE:
            raise CollectionMismatchError(f"collection {name!r} does not use cosine distance")
        indexes = {f: FieldType(k) for f, k in (record.get("indexes") or {}).items()}
        return _Meta(int(vectors.size), str(record.get("model_id")), indexes)

    def _add_indexes(self, name: str, meta: _Meta, wanted: Mapping[str, FieldType]) -> None:
        """Create missing payload indexes (a server only) and record them in the metadata."""
        for field, kind in wanted.items():
            if meta.indexes.get(field, kind) != kind:
                raise CollectionMismatchError(
                    f"collection {name!r} indexes {field!r} as {meta.indexes[field]}, not {kind}"
                )
        with self._engine(name):
            if not self.local:
                present = self._client.get_collection(name).payload_schema or {}
                for field, kind in wanted.items():
                    if field not in present:
                        self._client.create_payload_index(
                            name, field, field_schema=_TO_CLIENT[kind], wait=True
                        )
            if any(field not in meta.indexes for field in wanted):
                meta.indexes = {**meta.indexes, **wanted}
                self._client.update_collection(name, metadata=meta.record())

    def _scroll_pages(
        self, collection: str, native: models.Filter | None, limit: int | None, vectors: bool
    ) -> list[Any]:
        found: list[Any] = []
        offset = None
        while limit is None or len(found) < limit:
            page = SCROLL_PAGE if limit is None else min(SCROLL_PAGE, limit - len(found))
            batch, offset = self._client.scroll(
                collection,
                scroll_filter=native,
                limit=page,
                offset=offset,
                with_payload=True,
                with_vectors=vectors,
            )
            found.extend(batch)
            if offset is None:
                break
        return found


# -- translation -------------------------------------------------------------------------------


def _native(filter: Filter | None) -> models.Filter | None:
    filter = active(filter)
    return None if filter is None else _client_filter(filter)


def _client_filter(filter: Filter) -> models.Filter:
    def conditions(items: tuple[Any, ...]) -> list[Any] | None:
        return [_client_condition(c) for c in items] or None

    return models.Filter(
        must=conditions(filter.must),
        should=conditions(filter.should),
        must_not=conditions(filter.must_not),
    )


def _client_condition(condition: Any) -> Any:
    match condition:
        case FieldMatch(field, value):
            return models.FieldCondition(key=field, match=models.MatchValue(value=value))
        case FieldMatchAny(field, values):
            return models.FieldCondition(key=field, match=models.MatchAny(any=list(values)))
        case FieldRange(field, gt, gte, lt, lte):
            bounds = models.Range(gt=gt, gte=gte, lt=lt, lte=lte)
            return models.FieldCondition(key=field, range=bounds)
        case HasId(ids):
            return models.HasIdCondition(has_id=list(ids))
        case Filter():
            return _client_filter(condition)
    raise TypeError(f"not a filter condition: {condition!r}")


def _schema_type(info: Any) -> str | None:
    kind = getattr(info, "data_type", None)
    return getattr(kind, "value", kind)


def _record(found: Any, with_vectors: bool) -> Record:
    vector = list(found.vector) if with_vectors and found.vector is not None else None
    return Record(canonical_id(str(found.id)), dict(found.payload or {}), vector)
