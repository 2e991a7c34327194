"""The embedded default backend: qdrant-edge-py, Qdrant's own engine running in-process.

Layout under the store's directory::

    <path>/.lock                  held (flock) by the one process that has the store open
    <path>/<collection>/collection.json   dimension, embedding model and indexes, written first
    <path>/<collection>/shard/            one EdgeShard (its segments and its own WAL)

An ``EdgeShard`` holds one collection and locks its directory, so a collection is a
subdirectory and a store directory can be open once: a second ``EdgeVectorStore`` on the same
directory raises ``StoreLockedError`` (``EdgeVectorStore.shared`` hands out the open one
instead). In PyFlink process mode every Python worker is its own process: give each subtask
its own directory, or use a Qdrant server (``client``).

Engine facts measured with qdrant-edge-py 0.9.0 that shape this module:

- Writes go to its WAL before ``update`` returns, so they survive a crash without ``flush``.
  But the WAL is truncated only by ``flush``, which writes the segments out: never flushed,
  it grew ~2.1 MiB per 1,000 points (2.2 of 4.2 GB on disk at a million), and reopening
  after a crash replays all of it (19 s at 250,000 points; 0.8 s after a clean close). A flush
  costs 5-13 us per point written since the last and holds the GIL throughout
  (``bench/edge_flush.py``), so the store flushes a collection little and often: inside
  the write that finds its last flush ``flush_interval_s`` ago (5 s, as a Qdrant server).
- Search is exact until ``optimize()`` builds HNSW. A filter on an indexed keyword (``key``)
  is answered from the payload index and stays fast without HNSW (p95 ~0.2 ms at 100k points
  over 1000 keys); unfiltered search at 100k points is ~16 ms exact, ~1.5 ms with HNSW.
- Every call holds the GIL, ``optimize()`` included: about 12 s at 20k and 220 s at 100k
  384-dimensional points on 2 cores, during which no other Python thread of the process runs.
  So optimizing is explicit (``optimize()``) unless ``optimize_every`` asks for it, and
  should run when the process can afford to stall (or in a process of its own).
- Ordering (``scroll(order_by=...)``) needs a float or integer payload index.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import qdrant_edge as edge

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
    StoreLockedError,
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

METADATA_FILE = "collection.json"
SHARD_DIR = "shard"
LOCK_FILE = ".lock"
FORMAT_VERSION = 1
SCROLL_PAGE = 1024

_TO_EDGE = {
    FieldType.KEYWORD: edge.PayloadSchemaType.Keyword,
    FieldType.INTEGER: edge.PayloadSchemaType.Integer,
    FieldType.FLOAT: edge.PayloadSchemaType.Float,
}
_FROM_EDGE = {native: kind for kind, native in _TO_EDGE.items()}

_OPEN: dict[Path, EdgeVectorStore] = {}
_OPEN_LOCK = threading.RLock()
"""Stores open in this process, by resolved directory: the engine locks a directory per
opener, so a second opener in the same process must share the first one's store."""


@dataclass
class _Collection:
    name: str
    dimension: int
    model_id: str
    indexes: dict[str, FieldType]
    shard: edge.EdgeShard
    pending: int = 0
    """Points upserted since the last optimize (for ``optimize_every``)."""
    flushed_at: float = 0.0
    """``time.monotonic()`` at the collection's last flush, or its opening."""


class EdgeVectorStore(VectorStore):
    """A ``VectorStore`` in a local directory, one ``EdgeShard`` per collection.

    Collections are opened lazily on first use and stay open until ``close``.

    Args:
        path: the store's directory (created if missing).
        optimize_every: run ``optimize`` on a collection, inside the ``upsert`` call that
            crosses it, each time this many points were upserted into it; None (default)
            only when ``optimize()`` is called. See the module docstring for the cost.
        max_search_threads: the engine's search threads per collection; None lets it pick
            from the CPU count.
        flush_interval_s: flush a collection (write its segments out, so that its
            write-ahead log is truncated) inside the write that finds its last flush at
            least this long ago; None never, but at ``close``. See the module docstring.

    Raises:
        StoreLockedError: the directory is already open, in this process or another.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        optimize_every: int | None = None,
        max_search_threads: int | None = None,
        flush_interval_s: float | None = 5.0,
    ) -> None:
        root = Path(path).expanduser().resolve()
        if optimize_every is not None and optimize_every <= 0:
            raise ValueError("optimize_every must be a positive number of points or None")
        if flush_interval_s is not None and flush_interval_s < 0:
            raise ValueError("flush_interval_s must be a number of seconds >= 0, or None")
        self.path = root
        self.optimize_every = optimize_every
        self.max_search_threads = max_search_threads
        self.flush_interval_s = flush_interval_s
        self._lock = threading.RLock()
        self._collections: dict[str, _Collection] = {}
        self._closed = False
        with _OPEN_LOCK:
            if root in _OPEN:
                raise StoreLockedError(
                    f"vector store {root} is already open in this process: share that "
                    "instance (EdgeVectorStore.shared(path) returns it)"
                )
            root.mkdir(parents=True, exist_ok=True)
            self._lock_file = _lock_directory(root)
            _OPEN[root] = self
            self._refs = 1
        _remove_dropped(root)

    @classmethod
    def shared(cls, path: str | os.PathLike[str], **options: Any) -> EdgeVectorStore:
        """The store open on ``path`` in this process, else a new one (``options`` then apply).

        Every call must be matched by one ``close()``; the store closes with the last one.
        """
        root = Path(path).expanduser().resolve()
        with _OPEN_LOCK:
            store = _OPEN.get(root)
            if store is not None:
                store._refs += 1
                return store
            return cls(root, **options)

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
        with self._lock:
            self._check_open()
            coll = self._collections.get(name)
            if coll is None:
                meta = self._read_metadata(name)
                if meta is None:
                    self._create(name, dimension, model_id, wanted)
                    return
                check_mismatch(name, dimension, model_id, meta["dimension"], meta["model_id"])
                coll = self._open_collection(name, meta)
            check_mismatch(name, dimension, model_id, coll.dimension, coll.model_id)
            self._add_indexes(coll, wanted)

    def drop_collection(self, name: str) -> bool:
        validate_collection_name(name)
        with self._lock:
            self._check_open()
            coll = self._collections.pop(name, None)
            if coll is not None:
                with _engine_errors(name):
                    coll.shard.close()
            directory = self.path / name
            if not directory.exists():
                return False
            # Rename first: a crash during the removal leaves a tombstone, not half a
            # collection that still has its metadata file.
            tombstone = self.path / f".dropped-{name}-{uuid.uuid4().hex}"
            directory.rename(tombstone)
            shutil.rmtree(tombstone, ignore_errors=True)
            return True

    def collections(self) -> list[str]:
        self._check_open()
        return sorted(
            entry.name
            for entry in self.path.iterdir()
            if not entry.name.startswith(".") and (entry / METADATA_FILE).is_file()
        )

    def collection_info(self, name: str) -> CollectionInfo:
        coll = self._get(name)
        with _engine_errors(name):
            schema = coll.shard.info().payload_schema
            points = coll.shard.count(edge.CountRequest(exact=True))
        indexes = {
            field: _FROM_EDGE[info.data_type]
            for field, info in schema.items()
            if info.data_type in _FROM_EDGE
        }
        return CollectionInfo(name, coll.dimension, coll.model_id, points, indexes)

    def optimize(self, collection: str | None = None) -> None:
        """Build HNSW and merge segments now, in this thread, holding the GIL throughout.

        Args:
            collection: one collection, or None for every collection of the store.
        """
        names = [collection] if collection is not None else self.collections()
        for name in names:
            self._optimize(self._get(name))

    def close(self) -> None:
        with _OPEN_LOCK:
            if self._closed:
                return
            self._refs -= 1
            if self._refs > 0:
                return
            with self._lock:
                self._closed = True
                collections, self._collections = list(self._collections.values()), {}
            try:
                for coll in collections:
                    with _engine_errors(coll.name):
                        coll.shard.close()
            finally:
                _OPEN.pop(self.path, None)
                self._lock_file.close()  # releases the flock

    # -- points -----------------------------------------------------------------------------

    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        coll = self._get(collection)
        native = [_native_point(collection, p, coll.dimension) for p in points]
        if not native:
            return
        with _engine_errors(collection):
            coll.shard.update(edge.UpdateOperation.upsert_points(native))
        self._maybe_flush(coll)
        if self.optimize_every is not None:
            with self._lock:
                coll.pending += len(native)
                due = coll.pending >= self.optimize_every
            if due:
                self._optimize(coll)

    def set_payload(self, collection: str, ids: Sequence[str], payload: Mapping[str, Any]) -> None:
        coll = self._get(collection)
        wanted = unique_ids(ids)
        if not wanted:
            return
        with _engine_errors(collection):
            coll.shard.update(edge.UpdateOperation.set_payload(wanted, dict(payload)))
        self._maybe_flush(coll)

    def get(
        self, collection: str, ids: Sequence[str], *, with_vectors: bool = False
    ) -> list[Record]:
        coll = self._get(collection)
        wanted = unique_ids(ids)
        if not wanted:
            return []
        with _engine_errors(collection):
            found = coll.shard.retrieve(wanted, True, with_vectors)
        by_id = {str(r.id): _record(r, with_vectors) for r in found}
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
        coll = self._get(collection)
        query = check_vector(collection, vector, coll.dimension)
        if check_limit(limit) == 0:
            return []
        request = edge.QueryRequest(
            limit=limit,
            query=edge.Query.Nearest(query),
            filter=_native(filter),
            with_payload=True,
            score_threshold=score_threshold,
        )
        with _engine_errors(collection):
            hits = coll.shard.query(request)
        return [ScoredRecord(str(h.id), dict(h.payload or {}), float(h.score)) for h in hits]

    def scroll(
        self,
        collection: str,
        filter: Filter | None = None,
        limit: int | None = None,
        order_by: OrderBy | str | None = None,
        *,
        with_vectors: bool = False,
    ) -> list[Record]:
        coll = self._get(collection)
        order = order_field(collection, order_by, coll.indexes)
        if limit is not None and check_limit(limit) == 0:
            return []
        native = _native(filter)
        with _engine_errors(collection):
            if order is not None:
                # Ordered scrolls return no next offset: fetch everything wanted at once.
                wanted = limit if limit is not None else _count(coll.shard, native)
                if wanted == 0:
                    return []
                direction = edge.Direction.Desc if order.descending else edge.Direction.Asc
                found, _ = coll.shard.scroll(
                    edge.ScrollRequest(
                        limit=wanted,
                        filter=native,
                        with_payload=True,
                        with_vector=with_vectors,
                        order_by=edge.OrderBy(order.field, direction),
                    )
                )
            else:
                found = _scroll_pages(coll.shard, native, limit, with_vectors)
        return [_record(r, with_vectors) for r in found]

    def count(self, collection: str, filter: Filter | None = None) -> int:
        coll = self._get(collection)
        with _engine_errors(collection):
            return _count(coll.shard, _native(filter))

    def delete(
        self, collection: str, ids: Sequence[str] | None = None, filter: Filter | None = None
    ) -> None:
        if ids is None and filter is None:
            raise ValueError("delete needs ids, a filter or both (Filter() deletes everything)")
        coll = self._get(collection)
        if ids is not None:
            wanted = unique_ids(ids)
            if not wanted:
                return
            if active(filter) is None:
                operation = edge.UpdateOperation.delete_points(wanted)
            else:
                both = Filter(must=[HasId(wanted), filter])
                operation = edge.UpdateOperation.delete_points_by_filter(_edge_filter(both))
        else:
            assert filter is not None
            operation = edge.UpdateOperation.delete_points_by_filter(_edge_filter(filter))
        with _engine_errors(collection):
            coll.shard.update(operation)
        self._maybe_flush(coll)

    # -- internals --------------------------------------------------------------------------

    def _maybe_flush(self, coll: _Collection) -> None:
        """Flush ``coll`` if its last flush is ``flush_interval_s`` ago (one caller does)."""
        interval = self.flush_interval_s
        if interval is None:
            return
        now = time.monotonic()
        with self._lock:
            due = now - coll.flushed_at >= interval
            if due:
                coll.flushed_at = now
        if due:
            with _engine_errors(coll.name):
                coll.shard.flush()

    def _check_open(self) -> None:
        if self._closed:
            raise VectorStoreError(f"vector store {self.path} is closed")

    def _get(self, name: str) -> _Collection:
        coll = self._collections.get(name)
        if coll is not None and not self._closed:
            return coll
        validate_collection_name(name)
        with self._lock:
            self._check_open()
            coll = self._collections.get(name)
            if coll is None:
                meta = self._read_metadata(name)
                if meta is None:
                    raise CollectionNotFoundError(
                        f"collection {name!r} does not exist in {self.path} "
                        "(create it with ensure_collection)"
                    )
                coll = self._open_collection(name, meta)
            return coll

    def _read_metadata(self, name: str) -> dict[str, Any] | None:
        file = self.path / name / METADATA_FILE
        try:
            meta = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            raise VectorStoreError(f"collection {name!r}: cannot read {file}: {error}") from error
        if meta.get("format") != FORMAT_VERSION:
            raise VectorStoreError(
                f"collection {name!r}: {file} has format {meta.get('format')!r}, "
                f"this version reads {FORMAT_VERSION}"
            )
        return meta

    def _write_metadata(
        self, name: str, dimension: int, model_id: str, indexes: Mapping[str, FieldType]
    ) -> None:
        meta = {
            "format": FORMAT_VERSION,
            "dimension": dimension,
            "model_id": model_id,
            "distance": "cosine",
            "indexes": {field: str(kind) for field, kind in sorted(indexes.items())},
        }
        _write_atomically(self.path / name / METADATA_FILE, json.dumps(meta, indent=2))

    def _create(
        self, name: str, dimension: int, model_id: str, indexes: dict[str, FieldType]
    ) -> None:
        # The metadata goes first: a crash before the shard exists leaves a collection whose
        # shard is created on next open, never a shard whose model nobody recorded.
        (self.path / name).mkdir(exist_ok=True)
        self._write_metadata(name, dimension, model_id, indexes)
        meta = self._read_metadata(name)
        assert meta is not None
        self._open_collection(name, meta)

    def _open_collection(self, name: str, meta: dict[str, Any]) -> _Collection:
        directory = self.path / name / SHARD_DIR
        config = edge.EdgeConfig(
            vectors=edge.EdgeVectorParams(size=meta["dimension"], distance=edge.Distance.Cosine),
            max_search_threads=self.max_search_threads,
        )
        try:
            if (directory / "edge_config.json").exists():
                shard = edge.EdgeShard.load(str(directory), config)
            else:
                shard = edge.EdgeShard.create(str(directory), config)
        except Exception as error:
            if "WouldBlock" in str(error):
                raise StoreLockedError(
                    f"collection {name!r} in {directory} is locked by another opener"
                ) from error
            raise VectorStoreError(f"collection {name!r}: cannot open {directory}: {error}") from (
                error
            )
        indexes = {field: FieldType(kind) for field, kind in meta.get("indexes", {}).items()}
        coll = _Collection(
            name, meta["dimension"], meta["model_id"], indexes, shard, flushed_at=time.monotonic()
        )
        try:
            self._add_indexes(coll, indexes)
        except BaseException:
            shard.close()  # release the shard's directory lock for a later attempt
            raise
        self._collections[name] = coll
        return coll

    def _add_indexes(self, coll: _Collection, wanted: Mapping[str, FieldType]) -> None:
        """Create the indexes of ``wanted`` the shard lacks (also after a crash mid-create)."""
        for field, kind in wanted.items():
            if coll.indexes.get(field, kind) != kind:
                raise CollectionMismatchError(
                    f"collection {coll.name!r} indexes {field!r} as {coll.indexes[field]}, "
                    f"not {kind}"
                )
        with _engine_errors(coll.name):
            present = coll.shard.info().payload_schema
            for field, kind in wanted.items():
                if field not in present:
                    coll.shard.update(
                        edge.UpdateOperation.create_field_index(field, _TO_EDGE[kind])
                    )
        if any(field not in coll.indexes for field in wanted):
            coll.indexes = {**coll.indexes, **wanted}
            self._write_metadata(coll.name, coll.dimension, coll.model_id, coll.indexes)

    def _optimize(self, coll: _Collection) -> None:
        with _engine_errors(coll.name):
            coll.shard.optimize()
        with self._lock:
            coll.pending = 0


# -- translation -------------------------------------------------------------------------------


def _native(filter: Filter | None) -> edge.Filter | None:
    filter = active(filter)
    return None if filter is None else _edge_filter(filter)


def _edge_filter(filter: Filter) -> edge.Filter:
    def conditions(items: tuple[Any, ...]) -> list[Any] | None:
        return [_edge_condition(c) for c in items] or None

    return edge.Filter(
        must=conditions(filter.must),
        should=conditions(filter.should),
        must_not=conditions(filter.must_not),
    )


def _edge_condition(condition: Any) -> Any:
    match condition:
        case FieldMatch(field, value):
            return edge.FieldCondition(field, match=edge.MatchValue(value))
        case FieldMatchAny(field, values):
            return edge.FieldCondition(field, match=edge.MatchAny(list(values)))
        case FieldRange(field, gt, gte, lt, lte):
            return edge.FieldCondition(field, range=edge.RangeFloat(gte=gte, gt=gt, lte=lte, lt=lt))
        case HasId(ids):
            return edge.HasIdCondition(set(ids))
        case Filter():
            return _edge_filter(condition)
    raise TypeError(f"not a filter condition: {condition!r}")


def _native_point(collection: str, point: Point, dimension: int) -> edge.Point:
    """``point`` for the engine. A list of the right length goes as it is (the engine
    converts its floats; copying them first cost a fifth of an add); anything else, or a list
    the engine refuses, through ``check_vector`` (converted, or a clear error)."""
    vector = point.vector
    if type(vector) is list and len(vector) == dimension:
        try:
            return edge.Point(canonical_id(point.id), vector, dict(point.payload))
        except (TypeError, ValueError, OverflowError):
            pass  # not all floats: converted (or explained) below
    return edge.Point(
        canonical_id(point.id), check_vector(collection, vector, dimension), dict(point.payload)
    )


def _record(found: Any, with_vectors: bool) -> Record:
    vector = list(found.vector) if with_vectors and found.vector is not None else None
    return Record(str(found.id), dict(found.payload or {}), vector)


def _count(shard: edge.EdgeShard, native: edge.Filter | None) -> int:
    return int(shard.count(edge.CountRequest(exact=True, filter=native)))


def _scroll_pages(
    shard: edge.EdgeShard, native: edge.Filter | None, limit: int | None, with_vectors: bool
) -> list[Any]:
    """Unordered scroll, page by page (the engine returns 10 points unless told otherwise)."""
    found: list[Any] = []
    offset = None
    while limit is None or len(found) < limit:
        page = SCROLL_PAGE if limit is None else min(SCROLL_PAGE, limit - len(found))
        batch, offset = shard.scroll(
            edge.ScrollRequest(
                offset=offset,
                limit=page,
                filter=native,
                with_payload=True,
                with_vector=with_vectors,
            )
        )
        found.extend(batch)
        if offset is None:
            break
    return found


@contextmanager
def _engine_errors(collection: str) -> Iterator[None]:
    """The engine raises bare ``Exception``s: name the collection and keep one error type."""
    try:
        yield
    except VectorStoreError:
        raise
    except Exception as error:
        raise VectorStoreError(f"collection {collection!r}: {error}") from error


# -- files -------------------------------------------------------------------------------------


def _lock_directory(root: Path) -> IO[str]:
    """Hold an exclusive flock on ``root/.lock`` for as long as the returned file is open.

    Checked up front so that a second process fails at open with a clear message, not later
    on whichever collection it touches first.
    """
    file = open(root / LOCK_FILE, "a+", encoding="utf-8")  # noqa: SIM115 (held until close)
    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        file.seek(0)
        holder = file.read().strip() or "?"
        file.close()
        raise StoreLockedError(
            f"vector store {root} is open in another process (pid {holder}); an embedded "
            "store has one opener: give each process its own directory or use a Qdrant server"
        ) from None
    except BaseException:
        file.close()
        raise
    file.seek(0)
    file.truncate()
    file.write(str(os.getpid()))
    file.flush()
    return file


def _remove_dropped(root: Path) -> None:
    for entry in root.glob(".dropped-*"):
        shutil.rmtree(entry, ignore_errors=True)


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(temporary, "w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
