"""Fixtures: a fresh store of every backend per test, and small deterministic vectors.

Backends: ``edge`` (qdrant-edge-py in a temporary directory), ``shared`` (this process a
client of a directory hosted by another process, so every call, result and exception crosses
the socket), ``memory`` (qdrant-client's local ``:memory:`` mode) and ``server`` (a real Qdrant
server at ``$QDRANT_URL``, with ``$QDRANT_API_KEY`` if set; skipped where the variable is
unset, as no server runs here).

``Peer`` is another process with a shared store open, driven line by line (``test_shared``).
"""

from __future__ import annotations

import json
import math
import os
import select
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from flink_agents.integrations.vector_stores import VectorStore

DIM = 4
MODEL = "test:model-a"
SERVER_SKIP = "QDRANT_URL is not set: no Qdrant server to test against (none can run here)"
REPO = Path(__file__).resolve().parents[3]
PEER_TIMEOUT = 60.0
"""Seconds a peer may take to answer a line: generous, as other jobs share the machine."""

_PEER_SCRIPT = """
import json, sys
from flink_agents.integrations.vector_stores import edge
from flink_agents.integrations.vector_stores.shared import open_shared_store
def item(*args, **payload):  # imported on first use: pytest is slow to import
    from tests.integrations.vector_stores.test_conformance import item
    return item(*args, **payload)
edge.SCROLL_PAGE = 3
exec(sys.argv[2])
store = open_shared_store(sys.argv[1])
print(json.dumps(["ready", store.hosting]), flush=True)
for line in sys.stdin:
    try:
        reply = ["ok", eval(line)]
    except Exception as error:
        reply = ["raised", type(error).__name__]
    print(json.dumps(reply, default=repr), flush=True)
print(json.dumps(["closing", store.hosting]), flush=True)
store.close()
"""


def unit(*values: float) -> list[float]:
    """``values`` padded to ``DIM`` and L2-normalised."""
    padded = [*values, *([0.0] * (DIM - len(values)))]
    norm = math.sqrt(sum(v * v for v in padded))
    return [v / norm for v in padded]


@dataclass
class Backend:
    """How to open (another store object over) one backend's data, and its traits."""

    name: str
    opener: Callable[[], VectorStore]
    inspectable_indexes: bool
    opened: list[VectorStore] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def open(self) -> VectorStore:
        store = self.opener()
        self.opened.append(store)
        return store

    def new_name(self) -> str:
        """A collection name no other test (or earlier run on a shared server) uses."""
        name = f"fa_test_{uuid.uuid4().hex[:12]}"
        self.names.append(name)
        return name

    def cleanup(self) -> None:
        if self.name == "server" and self.names:
            store = self.open()
            for name in self.names:
                store.drop_collection(name)
        for store in self.opened:
            store.close()


class Peer:
    """Another Python process with ``open_shared_store(path)`` open as ``store``.

    It evaluates one expression per line sent (``item`` from the conformance suite is in
    scope) and answers with its JSON value; it closes the store when its stdin closes.

    Args:
        path: the store's directory.
        prelude: Python run before the store is opened (to patch the engine, say).
    """

    def __init__(self, path: Path, prelude: str = "") -> None:
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close or stop)
        self.process = subprocess.Popen(
            [sys.executable, "-c", _PEER_SCRIPT, str(path), prelude],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            cwd=REPO,
            bufsize=0,
        )
        self._pending = b""
        kind, hosting = self.read()
        assert kind == "ready", kind
        self.hosting: bool = hosting

    def __call__(self, expression: str) -> Any:
        """The value of ``expression`` evaluated in the peer (it must not raise)."""
        status, value = self.send(expression)
        assert status == "ok", f"{expression} raised {value} in the peer"
        return value

    def send(self, expression: str) -> list[Any]:
        """``["ok", value]`` or ``["raised", exception type name]``."""
        self.submit(expression)
        return self.read()

    def submit(self, expression: str) -> None:
        """Send ``expression`` without waiting: ``read()`` gets its answer."""
        assert "\n" not in expression
        assert self.process.stdin is not None
        self.process.stdin.write(expression.encode() + b"\n")

    def read(self) -> list[Any]:
        """The peer's next line, decoded; fails the test if none comes in time."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self._pending:
            ready, _, _ = select.select([fd], [], [], PEER_TIMEOUT)
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                self.kill()
                raise AssertionError(f"the peer stopped answering:\n{self.stderr()}")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> bool:
        """Close its stdin: it closes the store and exits. Returns whether it still hosted."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        kind, hosting = self.read()
        assert kind == "closing", kind
        assert self.process.wait(PEER_TIMEOUT) == 0, self.stderr()
        self._log.close()
        return hosting

    def kill(self) -> None:
        """SIGKILL: no close, no flush, nothing the process could do about it."""
        self.process.kill()
        self.process.wait(PEER_TIMEOUT)

    def stop(self) -> None:
        """Cleanup after a test, whatever state it left the peer in."""
        if self.process.poll() is None:
            if self.process.stdin is not None:
                self.process.stdin.close()
            try:
                self.process.wait(PEER_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()

    def stderr(self) -> str:
        if self._log.closed:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")


@pytest.fixture(params=["edge", "shared", "memory", "server"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    """A fresh store of every backend; scroll pages are made tiny so paging is exercised."""
    host: Peer | None = None
    if request.param == "edge":
        from flink_agents.integrations.vector_stores import edge

        monkeypatch.setattr(edge, "SCROLL_PAGE", 3)
        path = tmp_path / "vectors"
        made = Backend("edge", lambda: edge.EdgeVectorStore(path), inspectable_indexes=True)
    elif request.param == "shared":
        from flink_agents.integrations.vector_stores.shared import open_shared_store

        path = tmp_path / "vectors"
        host = Peer(path)  # sets its own SCROLL_PAGE to 3
        assert host.hosting

        def open_client() -> VectorStore:
            store = open_shared_store(path)
            assert not store.hosting
            return store

        made = Backend("shared", open_client, inspectable_indexes=True)
    else:
        from qdrant_client import QdrantClient

        from flink_agents.integrations.vector_stores import client

        monkeypatch.setattr(client, "SCROLL_PAGE", 3)
        if request.param == "memory":
            shared = QdrantClient(":memory:")  # every "open" is a new store over this data
            request.addfinalizer(shared.close)
            made = Backend(
                "memory",
                lambda: client.QdrantClientVectorStore(client=shared),
                inspectable_indexes=False,
            )
        else:
            url = os.environ.get("QDRANT_URL")
            if not url:
                pytest.skip(SERVER_SKIP)
            key = os.environ.get("QDRANT_API_KEY")
            made = Backend(
                "server",
                lambda: client.QdrantClientVectorStore(url, api_key=key),
                inspectable_indexes=True,
            )
    try:
        yield made
    finally:
        if host is None:
            made.cleanup()
        else:
            try:
                # every call was served by the host: no client took the directory over
                assert not any(getattr(store, "hosting", False) for store in made.opened)
                made.cleanup()
                assert host.close(), "the host lost the directory"
            finally:
                host.stop()


@pytest.fixture
def store(backend: Backend) -> VectorStore:
    """An open store of the parametrized backend."""
    return backend.open()


@pytest.fixture
def coll(backend: Backend, store: VectorStore) -> str:
    """A new collection of ``DIM`` dimensions for ``MODEL``, with an extra integer index ``n``."""
    name = backend.new_name()
    store.ensure_collection(name, DIM, MODEL, indexes={"n": "integer"})
    return name
