"""One embedded store per machine, shared by every process that opens its directory.

The embedded engine (``edge``) locks its directory for one process, and in PyFlink's process
mode every Python worker is a process of its own. So the first process to open a directory
*hosts* it: it holds the engine and serves the other processes' calls over a Unix socket
(Linux's abstract namespace, named after the directory; connections authenticate with a key
kept in the directory, readable by its owner only). The others are *clients*: each call is
sent to the host and answered as the store would answer it, exceptions included.

When the host closes its store (its job ended, its worker was cancelled) or dies, a client's
next call finds no host; it then takes the directory itself if it can (the directory's lock
decides between clients racing for it) and serves the rest from then on, else it waits for
whoever took it, up to ``timeout`` seconds. Every store call is idempotent (upserts by id,
deletes, payload merges), so a call whose answer was lost with its host is sent again.

Why this is safe: only the process holding the directory's lock ever opens the engine on it,
and it gives the lock up only after it stopped serving. What it does not do: processes on
other machines (or in other network namespaces, such as containers) cannot reach a host; a
job spread over several machines needs a Qdrant server (``client``).

No client waits forever for a host that does not serve. A host serves each connection on a
thread of its own, and a process whose interpreter is shutting down cannot start threads
(Python 3.12 refuses them from the moment its main thread ends, while it still joins the
others: a PyFlink worker cancelled on a failover gets there without closing its store, with
its embedding threads still writing). Such a host hangs up a connection it cannot serve and
stops listening; a process that cannot start its server does not take the directory (nor
leave its address bound); and connecting and the handshake are bounded
(``HANDSHAKE_TIMEOUT_S``), so that whatever holds the address without answering (any stuck
process) ends in ``StoreLockedError`` rather than in a wait that stalls the job. A call's
answer is awaited as long as the call takes.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import pickle
import socket
import struct
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from multiprocessing import AuthenticationError
from multiprocessing.connection import (
    Connection,
    Listener,
    answer_challenge,
    deliver_challenge,
)
from pathlib import Path
from typing import Any

from flink_agents.integrations.vector_stores._base import (
    CollectionInfo,
    FieldType,
    Filter,
    OrderBy,
    Point,
    Record,
    ScoredRecord,
    StoreLockedError,
    VectorStore,
    VectorStoreError,
)
from flink_agents.integrations.vector_stores.edge import EdgeVectorStore

KEY_FILE = ".share-key"
_CALLS = frozenset(
    {
        "ensure_collection",
        "upsert",
        "set_payload",
        "get",
        "search",
        "scroll",
        "count",
        "delete",
        "drop_collection",
        "collections",
        "collection_info",
        "optimize",
    }
)
_RETRY_PAUSE = 0.05
HANDSHAKE_TIMEOUT_S = 10.0
"""How long connecting to a host and authenticating may take: a serving host answers at once,
from a thread it starts per connection. Past it the address counts as having no host."""

_SHARED: dict[Path, SharedVectorStore] = {}
_SHARED_LOCK = threading.Lock()


def open_shared_store(
    path: str | os.PathLike[str], *, timeout: float = 60.0, **options: Any
) -> SharedVectorStore:
    """The embedded store in directory ``path``, shared with every process of this machine.

    The same instance for every opener in this process (each ``open_shared_store`` is
    matched by one ``close()``; the last one closes it).

    Args:
        timeout: how long a call waits for a host, when the one it used went away and
            another process took the directory, before it raises ``StoreLockedError``.
        **options: ``EdgeVectorStore`` options, used when this process hosts the store.
    """
    root = Path(path).expanduser().resolve()
    with _SHARED_LOCK:
        store = _SHARED.get(root)
        if store is not None:
            store._refs += 1
            return store
        store = _SHARED[root] = SharedVectorStore(root, timeout, options)
    try:
        store._settle(time.monotonic() + timeout)
    except BaseException:
        store.close()
        raise
    return store


class SharedVectorStore(VectorStore):
    """A ``VectorStore`` on an embedded directory, hosted here or by another process (see
    the module docstring). Made by ``open_shared_store``."""

    def __init__(self, root: Path, timeout: float, options: Mapping[str, Any]) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.path = root
        self.timeout = timeout
        self._options = dict(options)
        self._address = "\0flink-agents-store-" + hashlib.sha256(bytes(root)).hexdigest()[:32]
        self._authkey = _authkey(root)
        self._role_lock = threading.Lock()
        self._local: EdgeVectorStore | None = None
        self._server: _Server | None = None
        self._idle: list[Connection] = []
        self._idle_lock = threading.Lock()
        self._refs = 1
        self._closed = False

    @property
    def hosting(self) -> bool:
        """Whether this process holds the directory (and serves the others)."""
        return self._local is not None

    # -- the VectorStore interface, forwarded -------------------------------------------------

    def ensure_collection(
        self,
        name: str,
        dimension: int,
        model_id: str,
        indexes: Mapping[str, FieldType | str] | None = None,
    ) -> None:
        self._call("ensure_collection", name, dimension, model_id, indexes)

    def upsert(self, collection: str, points: Sequence[Point]) -> None:
        self._call("upsert", collection, list(points))

    def set_payload(self, collection: str, ids: Sequence[str], payload: Mapping[str, Any]) -> None:
        self._call("set_payload", collection, list(ids), dict(payload))

    def get(
        self, collection: str, ids: Sequence[str], *, with_vectors: bool = False
    ) -> list[Record]:
        return self._call("get", collection, list(ids), with_vectors=with_vectors)

    def search(
        self,
        collection: str,
        vector: Sequence[float],
        limit: int,
        filter: Filter | None = None,
        *,
        score_threshold: float | None = None,
    ) -> list[ScoredRecord]:
        return self._call(
            "search", collection, vector, limit, filter, score_threshold=score_threshold
        )

    def scroll(
        self,
        collection: str,
        filter: Filter | None = None,
        limit: int | None = None,
        order_by: OrderBy | str | None = None,
        *,
        with_vectors: bool = False,
    ) -> list[Record]:
        return self._call("scroll", collection, filter, limit, order_by, with_vectors=with_vectors)

    def count(self, collection: str, filter: Filter | None = None) -> int:
        return self._call("count", collection, filter)

    def delete(
        self, collection: str, ids: Sequence[str] | None = None, filter: Filter | None = None
    ) -> None:
        self._call("delete", collection, None if ids is None else list(ids), filter)

    def drop_collection(self, name: str) -> bool:
        """As ``VectorStore.drop_collection``, with one difference: when the host was lost
        after the call reached it, the call is sent again to the next host, which finds the
        collection gone and answers False although this call dropped it. The collection is
        gone either way; only the answer cannot tell who dropped it."""
        return self._call("drop_collection", name)

    def collections(self) -> list[str]:
        return self._call("collections")

    def collection_info(self, name: str) -> CollectionInfo:
        return self._call("collection_info", name)

    def optimize(self, collection: str | None = None) -> None:
        self._call("optimize", collection)

    def close(self) -> None:
        with _SHARED_LOCK:
            if self._closed:
                return
            self._refs -= 1
            if self._refs > 0:
                return
            self._closed = True
            _SHARED.pop(self.path, None)
        with self._role_lock:
            server, local = self._server, self._local
            self._server = self._local = None
        try:
            if server is not None:
                server.close()  # no call is served past this point...
        finally:
            if local is not None:
                local.close()  # ...so the lock is released only after serving stopped
            self._drop_idle()

    # -- calls ----------------------------------------------------------------------------------

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        deadline = None
        while True:
            local = self._local
            if local is not None:
                return getattr(local, method)(*args, **kwargs)
            if self._closed:
                raise VectorStoreError(f"vector store {self.path} is closed")
            connection = None
            try:
                connection = self._connection()
                connection.send((method, args, kwargs))
                status, value = connection.recv()
            except (OSError, EOFError):  # no host, or it went away: find the next one
                if connection is not None:
                    connection.close()
                if deadline is None:
                    deadline = time.monotonic() + self.timeout
                self._settle(deadline)
                continue
            except BaseException:  # e.g. an argument that cannot be pickled: nothing was sent
                if connection is not None:
                    connection.close()
                raise
            with self._idle_lock:
                self._idle.append(connection)
            if status == "ok":
                return value
            raise value

    def _connection(self) -> Connection:
        with self._idle_lock:
            if self._idle:
                return self._idle.pop()
        return _connect(self._address, self._authkey)

    def _settle(self, deadline: float) -> None:
        """Find a host: reach the one serving, else take the directory; wait for another
        process to do either until ``deadline``.

        Raises:
            StoreLockedError: a process holds the directory, or its address, but does not
                answer.
            VectorStoreError: this process cannot serve the directory to others (it cannot
                start threads: its interpreter is shutting down).
        """
        with self._role_lock:
            while True:
                if self._local is not None or self._closed:
                    return
                try:
                    reached = self._connection()
                except (OSError, EOFError):  # EOF: a host that died during the handshake
                    pass
                else:
                    with self._idle_lock:
                        self._idle.append(reached)
                    return
                self._drop_idle()  # connections to a host that is gone
                try:
                    local = EdgeVectorStore.shared(self.path, **self._options)
                except StoreLockedError as error:
                    self._wait_for_host(deadline, error)
                    continue
                try:
                    self._server = _Server(local, self._address, self._authkey)
                except _AddressTaken as error:  # held by a process that did not answer
                    local.close()
                    self._wait_for_host(deadline, error)
                    continue
                except RuntimeError as error:  # no thread can be started here
                    local.close()  # the directory goes back: this process cannot serve it
                    raise VectorStoreError(
                        f"vector store {self.path}: this process cannot serve it to others "
                        f"({error})"
                    ) from error
                except BaseException:
                    local.close()
                    raise
                self._local = local
                return

    def _wait_for_host(self, deadline: float, error: OSError | StoreLockedError) -> None:
        """Pause before looking for a host again, unless ``deadline`` has passed: then raise
        ``StoreLockedError`` (``error`` says what holds the directory or its address)."""
        if time.monotonic() >= deadline:
            raise StoreLockedError(
                f"vector store {self.path} is held by another process that does not serve "
                f"it ({error}); is it an older version of flink-agents, or in another network "
                "namespace (a container)?"
            ) from None
        time.sleep(_RETRY_PAUSE)

    def _drop_idle(self) -> None:
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


class _AddressTaken(OSError):
    """Another process listens on the store's address (without holding its directory)."""


class _Server:
    """Serves a store's calls to other processes: a thread per connection, which first
    authenticates its client (so a client that never completes the handshake holds up
    nobody else).

    Raises:
        _AddressTaken: another process listens on ``address``.
        RuntimeError: no thread can be started (the interpreter is shutting down); nothing
            listens on ``address`` then.
    """

    def __init__(self, store: EdgeVectorStore, address: str, authkey: bytes) -> None:
        self._store = store
        self._address = address
        self._authkey = authkey
        try:
            self._listener = Listener(address, family="AF_UNIX")
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise _AddressTaken(error.errno, f"its address is taken: {error}") from error
            raise
        self._connections: set[Connection] = set()
        self._busy = 0
        self._state = threading.Condition()
        self._closing = False
        self._accepting = threading.Thread(
            target=self._accept, name="flink-agents-store-host", daemon=True
        )
        try:
            self._accepting.start()
        except BaseException:
            self._listener.close()  # bound with nobody to accept: clients would wait on it
            raise

    def close(self, timeout: float = 30.0) -> None:
        """Stop accepting, let calls in progress finish (up to ``timeout``), then drop
        every connection: their clients find the next host."""
        with self._state:
            self._closing = True
        # Wake accept() up to see the flag: a bare connect returns once the connection is
        # queued, whether or not accept() takes this one or another first.
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as wake:
            wake.connect(self._address)
        self._accepting.join(timeout)
        self._listener.close()
        with self._state:
            self._state.wait_for(lambda: self._busy == 0, timeout)
            connections = list(self._connections)
        for connection in connections:
            _hang_up(connection)

    def _accept(self) -> None:
        while True:
            try:
                connection = self._listener.accept()
            except OSError:
                if self._closing:
                    return
                continue
            with self._state:
                if self._closing:
                    connection.close()
                    return
                self._connections.add(connection)
            try:
                threading.Thread(
                    target=self._serve,
                    args=(connection,),
                    name="flink-agents-store-call",
                    daemon=True,
                ).start()
            except RuntimeError:
                # No thread can be started (the interpreter is shutting down): this host
                # serves no new connection. It hangs this one up and stops listening, so a
                # client finds no host rather than one that never answers; connections
                # already served go on until the process ends.
                with self._state:
                    self._connections.discard(connection)
                connection.close()
                self._listener.close()
                return

    def _serve(self, connection: Connection) -> None:
        try:
            try:
                deliver_challenge(connection, self._authkey)
                answer_challenge(connection, self._authkey)
            except (OSError, EOFError, AuthenticationError):  # a bad or vanished client
                return
            while True:
                try:
                    method, args, kwargs = connection.recv()
                except (OSError, EOFError):
                    return
                with self._state:
                    if self._closing:
                        return  # unanswered: the client sends it to the next host
                    self._busy += 1
                try:
                    reply = ("ok", self._run(method, args, kwargs))
                except Exception as error:
                    reply = ("error", _portable(error))
                finally:
                    with self._state:
                        self._busy -= 1
                        self._state.notify_all()
                try:
                    connection.send(reply)
                except (OSError, EOFError):
                    return
        finally:
            with self._state:
                self._connections.discard(connection)
            connection.close()

    def _run(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if method not in _CALLS:
            raise VectorStoreError(f"not a vector store call: {method!r}")
        return getattr(self._store, method)(*args, **kwargs)


def _connect(address: str, authkey: bytes) -> Connection:
    """A connection to the host listening on ``address``, authenticated both ways.

    Connecting and the handshake wait at most ``HANDSHAKE_TIMEOUT_S`` each step; calls on the
    connection then wait for their answers as long as they take.

    Raises:
        OSError: nothing listens on ``address``, or what does has not answered in time
            (``BlockingIOError``); EOFError: it hung up.
    """
    with socket.socket(socket.AF_UNIX) as raw:
        _bound_waits(raw.fileno(), HANDSHAKE_TIMEOUT_S)  # connect() waits on a full backlog
        raw.connect(address)
        connection = Connection(raw.detach())
    try:
        answer_challenge(connection, authkey)
        deliver_challenge(connection, authkey)
        _bound_waits(connection.fileno(), 0.0)
    except BaseException:
        connection.close()
        raise
    return connection


def _bound_waits(descriptor: int, seconds: float) -> None:
    """Bound each blocking send and receive on socket ``descriptor`` (and a Unix socket's
    connect) to ``seconds``, past which it fails with ``BlockingIOError``; 0: no bound."""
    whole = int(seconds)
    value = struct.pack("@ll", whole, int((seconds - whole) * 1_000_000))  # struct timeval
    with socket.socket(fileno=os.dup(descriptor)) as view:
        view.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
        view.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)


def _hang_up(connection: Connection) -> None:
    """Shut a served connection down: its thread's ``recv`` returns, its client sees the end."""
    with contextlib.suppress(OSError), socket.socket(fileno=os.dup(connection.fileno())) as view:
        view.shutdown(socket.SHUT_RDWR)


def _portable(error: Exception) -> Exception:
    """``error`` if it survives pickling, else a ``VectorStoreError`` saying what it was."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return VectorStoreError(f"{type(error).__name__}: {error}")
    return error


def _authkey(root: Path) -> bytes:
    """The key connections to ``root``'s host authenticate with: made once, readable by the
    directory's owner only (created beside and linked into place, so a racing process never
    reads half a key)."""
    path = root / KEY_FILE
    with contextlib.suppress(FileNotFoundError):
        key = path.read_bytes()
        if key:
            return key
    temporary = root / f".{KEY_FILE}.{uuid.uuid4().hex}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(os.urandom(32))
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path.read_bytes()
