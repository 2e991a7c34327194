"""The vector-store interface, its record types and a backend-neutral filter model.

Long-term memory and knowledge (design section 3) talk to Qdrant only through ``VectorStore``,
so the embedded engine (``edge``) and a Qdrant server (``client``) are interchangeable. The
types here carry no engine import: each backend translates them to its own.
"""

from __future__ import annotations

import math
import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType, TracebackType
from typing import Any, Self

from flink_agents.api import FlinkAgentsError

# -- errors --------------------------------------------------------------------------------


class VectorStoreError(FlinkAgentsError):
    """A vector-store operation failed; the message names the collection."""


class CollectionNotFoundError(VectorStoreError, KeyError):
    """The collection does not exist (``ensure_collection`` was never called for it)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class CollectionMismatchError(VectorStoreError, ValueError):
    """An existing collection was made for another dimension or embedding model.

    Raised instead of mixing vectors of different models, whose scores are meaningless.
    """


class StoreLockedError(VectorStoreError):
    """An embedded store's directory is already open (in this process or another)."""


# -- schema ----------------------------------------------------------------------------------


class FieldType(StrEnum):
    """The type of a payload index. ``FLOAT``/``INTEGER`` indexes also allow ``order_by``."""

    KEYWORD = "keyword"
    INTEGER = "integer"
    FLOAT = "float"


DEFAULT_INDEXES: Mapping[str, FieldType] = MappingProxyType(
    {
        "key": FieldType.KEYWORD,
        "set": FieldType.KEYWORD,
        "tags": FieldType.KEYWORD,
        "created_time": FieldType.FLOAT,
        "kind": FieldType.KEYWORD,
    }
)
"""Indexed in every collection: the fields long-term memory and knowledge filter on.
``created_time`` is epoch seconds as a float, so a range filter and ``order_by`` work on it."""

ORDERABLE = frozenset({FieldType.FLOAT, FieldType.INTEGER})

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def validate_collection_name(name: str) -> str:
    """``name`` if it is safe everywhere: as a directory name and as a server collection.

    Raises:
        ValueError: it is empty, too long, or has characters other than letters, digits,
            ``_``, ``.`` and ``-`` (or starts with one of the last three).
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"invalid collection name {name!r}: use 1-128 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )
    return name


def merged_indexes(extra: Mapping[str, FieldType | str] | None) -> dict[str, FieldType]:
    """The default indexes plus ``extra`` (which may not retype a default field)."""
    result = dict(DEFAULT_INDEXES)
    for name, kind in (extra or {}).items():
        kind = FieldType(kind)
        if result.get(name, kind) != kind:
            raise ValueError(f"payload field {name!r} is always indexed as {result[name]}")
        result[name] = kind
    return result


# -- records ---------------------------------------------------------------------------------


def canonical_id(value: str | uuid.UUID) -> str:
    """``value`` as the lower-case hyphenated UUID string every backend returns.

    Raises:
        ValueError: it is not a UUID.
    """
    try:
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(value))
    except (TypeError, ValueError, AttributeError) as error:
        raise ValueError(f"point id {value!r} is not a UUID string") from error


@dataclass(frozen=True)
class Point:
    """What ``upsert`` writes: a UUID string id, a vector and a JSON-serializable payload."""

    id: str
    vector: Sequence[float]
    payload: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Record:
    """A stored point as read back; ``vector`` only when asked for (normalised by cosine)."""

    id: str
    payload: dict[str, Any]
    vector: list[float] | None = None


@dataclass(frozen=True)
class ScoredRecord:
    """A search hit: cosine similarity in ``score``, higher is closer."""

    id: str
    payload: dict[str, Any]
    score: float


@dataclass(frozen=True)
class CollectionInfo:
    """What a collection was made for, and what the engine reports about it now.

    ``indexes`` are the payload indexes the engine itself reports; Qdrant's local mode keeps
    none (it ignores payload indexes), so there it is empty.
    """

    name: str
    dimension: int
    model_id: str
    points: int
    indexes: Mapping[str, FieldType]


# -- filters ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldMatch:
    """The field equals ``value``; on an array field (``tags``), one element equals it.

    Only str and int: qdrant-edge 0.9 reads a bool as an int and never matches a stored bool,
    so booleans are kept out of the model rather than behaving differently per backend.
    """

    field: str
    value: str | int

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, str | int):
            raise TypeError(
                f"FieldMatch({self.field!r}) matches a str or an int, not {self.value!r}"
            )


@dataclass(frozen=True)
class FieldMatchAny:
    """The field equals one of ``values`` (any-match for arrays); empty matches nothing."""

    field: str
    values: tuple[str, ...] | tuple[int, ...]

    def __init__(self, field: str, values: Iterable[str] | Iterable[int]) -> None:
        items = () if isinstance(values, str) else tuple(values)
        if isinstance(values, str) or not (
            all(isinstance(v, str) for v in items)
            or all(isinstance(v, int) and not isinstance(v, bool) for v in items)
        ):
            raise TypeError(f"FieldMatchAny({field!r}) needs a list of all str or all int")
        object.__setattr__(self, "field", field)
        object.__setattr__(self, "values", items)


@dataclass(frozen=True)
class FieldRange:
    """The numeric field lies in the given bounds (at least one of them)."""

    field: str
    gt: float | None = None
    gte: float | None = None
    lt: float | None = None
    lte: float | None = None

    def __post_init__(self) -> None:
        bounds = (self.gt, self.gte, self.lt, self.lte)
        if all(b is None for b in bounds):
            raise ValueError(f"FieldRange({self.field!r}) needs at least one bound")
        if any(b is not None and not math.isfinite(b) for b in bounds):
            raise ValueError(f"FieldRange({self.field!r}) bounds must be finite numbers")


@dataclass(frozen=True)
class HasId:
    """The point's id is one of ``ids``."""

    ids: tuple[str, ...]

    def __init__(self, ids: Iterable[str]) -> None:
        object.__setattr__(self, "ids", tuple(canonical_id(i) for i in ids))


@dataclass(frozen=True)
class Filter:
    """All of ``must``, at least one of ``should`` (when given), none of ``must_not``.

    Filters nest: a ``Filter`` is itself a condition. An empty filter matches every point.
    """

    must: tuple[Condition, ...] = ()
    should: tuple[Condition, ...] = ()
    must_not: tuple[Condition, ...] = ()

    def __init__(
        self,
        must: Iterable[Condition] = (),
        should: Iterable[Condition] = (),
        must_not: Iterable[Condition] = (),
    ) -> None:
        for name, value in (("must", must), ("should", should), ("must_not", must_not)):
            items = tuple(value)
            for item in items:
                if not isinstance(item, FieldMatch | FieldMatchAny | FieldRange | HasId | Filter):
                    raise TypeError(f"Filter.{name} holds {item!r}, not a filter condition")
            object.__setattr__(self, name, items)

    def is_empty(self) -> bool:
        return not (self.must or self.should or self.must_not)


Condition = FieldMatch | FieldMatchAny | FieldRange | HasId | Filter


@dataclass(frozen=True)
class OrderBy:
    """Order ``scroll`` by a payload field indexed as ``FLOAT`` or ``INTEGER``.

    Points without the field are left out, as Qdrant does.
    """

    field: str
    descending: bool = False


# -- the interface ---------------------------------------------------------------------------


class VectorStore(ABC):
    """Named collections of points, each bound to one embedding model and dimension.

    Implementer obligations:

    - Cosine distance everywhere; ``score`` is the cosine similarity (higher is closer).
    - ``ensure_collection`` creates the collection with ``DEFAULT_INDEXES`` plus the extra
      indexes; on an existing one it raises ``CollectionMismatchError`` if the dimension or
      ``model_id`` differs, and adds indexes that are missing. It is idempotent.
    - Every other method raises ``CollectionNotFoundError`` for an unknown collection, and
      ``ValueError`` for a vector of the wrong length or an id that is not a UUID string.
    - ``upsert`` overwrites a point with the same id (vector and whole payload): replayed
      writes with deterministic ids (``point_id``) never duplicate.
    - Ids are returned as canonical UUID strings (``canonical_id``); payloads as plain dicts.
    - A write is visible to every read that starts after it returns.
    - Every method is safe to call from several threads at once.
    """

    @abstractmethod
    def ensure_collection(
        self,
        name: str,
        dimension: int,
        model_id: str,
        indexes: Mapping[str, FieldType | str] | None = None,
    ) -> None:
        """Create ``name`` if missing, else check it was made for ``dimension``/``model_id``.

        Args:
            name: see ``validate_collection_name``.
            dimension: the vector length.
            model_id: the embedding model's ``model_id``; recorded at creation.
            indexes: payload indexes beyond ``DEFAULT_INDEXES``.

        Raises:
            CollectionMismatchError: the collection exists for another dimension or model.
        """

    @abstractmethod
    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        """Insert or overwrite ``points`` by id."""

    @abstractmethod
    def set_payload(self, collection: str, ids: Sequence[str], payload: Mapping[str, Any]) -> None:
        """Merge ``payload`` into the payload of the points ``ids`` (other fields and the
        vectors stay): far cheaper than re-upserting a point to change one field. Callers
        pass ids that exist."""

    @abstractmethod
    def get(
        self, collection: str, ids: Sequence[str], *, with_vectors: bool = False
    ) -> list[Record]:
        """The stored points among ``ids``, in the order of ``ids``; missing ids are omitted
        and a repeated id is returned once."""

    @abstractmethod
    def search(
        self,
        collection: str,
        vector: Sequence[float],
        limit: int,
        filter: Filter | None = None,
        *,
        score_threshold: float | None = None,
    ) -> list[ScoredRecord]:
        """The ``limit`` points nearest to ``vector`` that match ``filter``, best first."""

    @abstractmethod
    def scroll(
        self,
        collection: str,
        filter: Filter | None = None,
        limit: int | None = None,
        order_by: OrderBy | str | None = None,
        *,
        with_vectors: bool = False,
    ) -> list[Record]:
        """Points matching ``filter``: all of them when ``limit`` is None.

        Without ``order_by`` the order is the engine's (stable, by id). With it, the field
        must have a ``FLOAT`` or ``INTEGER`` index (a plain string means ascending).

        Raises:
            ValueError: ``order_by`` names a field without an orderable index.
        """

    @abstractmethod
    def count(self, collection: str, filter: Filter | None = None) -> int:
        """The exact number of points matching ``filter``."""

    @abstractmethod
    def delete(
        self, collection: str, ids: Sequence[str] | None = None, filter: Filter | None = None
    ) -> None:
        """Delete points by id, by filter, or (both given) the listed ids that match.

        Unknown ids are ignored. ``filter=Filter()`` deletes everything.

        Raises:
            ValueError: neither ``ids`` nor ``filter`` was given.
        """

    @abstractmethod
    def drop_collection(self, name: str) -> bool:
        """Delete the collection and its points; False if it did not exist."""

    @abstractmethod
    def collections(self) -> list[str]:
        """The names of the existing collections, sorted."""

    @abstractmethod
    def collection_info(self, name: str) -> CollectionInfo:
        """The recorded dimension and model, the point count and the engine's indexes."""

    def optimize(self, collection: str | None = None) -> None:  # noqa: B027
        """Let the engine build its indexes now (a no-op where the engine does it itself)."""

    @abstractmethod
    def close(self) -> None:
        """Release the store; it is unusable afterwards. Idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# -- helpers shared by the backends ----------------------------------------------------------


def check_vector(collection: str, vector: Sequence[float], dimension: int) -> list[float]:
    """``vector`` as a list of floats of length ``dimension``, or a clear ``ValueError``."""
    values = [float(x) for x in vector]
    if len(values) != dimension:
        raise ValueError(
            f"collection {collection!r} holds {dimension}-dimensional vectors, got {len(values)}"
        )
    return values


def order_field(
    collection: str, order_by: OrderBy | str | None, indexes: Mapping[str, FieldType]
) -> OrderBy | None:
    """``order_by`` normalised, checked against the collection's recorded indexes."""
    if order_by is None:
        return None
    order = OrderBy(order_by) if isinstance(order_by, str) else order_by
    if indexes.get(order.field) not in ORDERABLE:
        raise ValueError(
            f"cannot order collection {collection!r} by {order.field!r}: it needs a float or "
            "integer index (pass it in ensure_collection(indexes=...))"
        )
    return order


def check_mismatch(
    collection: str, dimension: int, model_id: str, found_dimension: int, found_model: str | None
) -> None:
    """Raise ``CollectionMismatchError`` unless the recorded dimension and model match."""
    if found_dimension != dimension:
        raise CollectionMismatchError(
            f"collection {collection!r} holds {found_dimension}-dimensional vectors of model "
            f"{found_model!r}; asked for {dimension} dimensions of model {model_id!r}"
        )
    if found_model != model_id:
        raise CollectionMismatchError(
            f"collection {collection!r} holds vectors of embedding model {found_model!r}, not "
            f"{model_id!r}: vectors of different models must not mix (use another collection "
            "or re-embed into a new one)"
        )


def check_creation_args(name: str, dimension: int, model_id: str) -> None:
    validate_collection_name(name)
    if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension <= 0:
        raise ValueError(f"collection {name!r}: dimension must be a positive int, got {dimension}")
    if not isinstance(model_id, str) or not model_id:
        raise ValueError(f"collection {name!r}: model_id must be a non-empty string")


def unique_ids(ids: Iterable[str]) -> list[str]:
    """Canonical ids, first occurrence kept."""
    return list(dict.fromkeys(canonical_id(i) for i in ids))


def check_limit(limit: int) -> int:
    """``limit`` if it is >= 0 (0 asks for nothing), else a ``ValueError``."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    return limit


def active(filter: Filter | None) -> Filter | None:
    """None for a missing or empty filter, so backends skip the filter step."""
    return None if filter is None or filter.is_empty() else filter
