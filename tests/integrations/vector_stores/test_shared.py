"""One embedded directory shared by several processes: hosting, takeover, keys, errors.

Each peer is a child process (``Peer``) with the store open; this process is a client (or,
after a takeover, the host). ``item(n)`` is the conformance suite's point ``n``.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, answer_challenge
from pathlib import Path
from typing import Any

import pytest

from flink_agents.integrations.vector_stores import (
    CollectionMismatchError,
    CollectionNotFoundError,
    Point,
    StoreLockedError,
    VectorStoreError,
    open_vector_store,
)
from flink_agents.integrations.vector_stores.edge import EdgeVectorStore
from flink_agents.integrations.vector_stores.shared import (
    KEY_FILE,
    SharedVectorStore,
    open_shared_store,
)
from tests.integrations.vector_stores.conftest import DIM, MODEL, PEER_TIMEOUT, REPO, Peer
from tests.integrations.vector_stores.test_conformance import item, ns

ADD_MEM = f"store.ensure_collection('mem', {DIM}, {MODEL!r})"
CHALLENGE, WELCOME = b"#CHALLENGE#", b"#WELCOME#"
"""Messages of multiprocessing's handshake (private names from Python 3.12 on)."""
STEP_TIMEOUT = 10.0
"""Seconds the handshake and closing tests give a step that takes well under one (short: a
host that hangs fails them rather than the whole run)."""


@pytest.fixture
def peers(tmp_path: Path) -> Iterator[Callable[..., Peer]]:
    """Starts peers on ``tmp_path`` (or another directory); stops any left at the end."""
    started: list[Peer] = []

    def start(prelude: str = "", path: Path = tmp_path) -> Peer:
        peer = Peer(path, prelude)
        started.append(peer)
        return peer

    yield start
    for peer in reversed(started):
        peer.stop()


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[Callable[..., SharedVectorStore]]:
    """``open_shared_store`` for this process; every store it opened is closed at the end."""
    stores: list[SharedVectorStore] = []

    def open_(path: Path = tmp_path, **options: Any) -> SharedVectorStore:
        store = open_shared_store(path, **options)
        stores.append(store)
        return store

    yield open_
    for store in reversed(stores):
        store.close()


class Background:
    """``call()`` running in a daemon thread: a call that never returns fails its test
    instead of hanging the run."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self._outcome: list[Any] = []
        self._errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], Any]) -> None:
        try:
            self._outcome.append(call())
        except BaseException as error:
            self._errors.append(error)

    def result(self, deadline: float | None = None) -> Any:
        """The call's value (or its exception), waiting up to ``deadline`` (monotonic)."""
        if deadline is None:
            deadline = time.monotonic() + PEER_TIMEOUT
        self._thread.join(max(0.0, deadline - time.monotonic()))
        assert not self._thread.is_alive(), "the call never returned"
        if self._errors:
            raise self._errors[0]
        return self._outcome[0]


def in_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    """``work(0..count-1)`` in threads at once; their results (or the first exception)."""
    calls = [Background(lambda index=index: work(index)) for index in range(count)]
    deadline = time.monotonic() + PEER_TIMEOUT
    return [call.result(deadline) for call in calls]


# -- sharing -----------------------------------------------------------------------------------


def test_two_processes_read_each_others_points(peers: Callable[..., Peer], opened: Any) -> None:
    """The first opener hosts, the second is its client; each reads what the other wrote."""
    host = peers()
    client = opened()
    assert host.hosting
    assert not client.hosting
    client.ensure_collection("mem", DIM, MODEL)
    client.upsert("mem", [item(n) for n in range(10)])
    host("store.upsert('mem', [item(n, note='host') for n in range(10, 20)])")
    assert host("store.count('mem')") == client.count("mem") == 20
    assert client.get("mem", [item(15).id])[0].payload["note"] == "host"
    assert host(f"store.get('mem', [{item(3).id!r}])[0].payload['n']") == 3
    assert host("store.collections()") == client.collections() == ["mem"]


def test_processes_opening_at_once_agree_on_one_host(
    peers: Callable[..., Peer], opened: Any
) -> None:
    """Three processes racing to open a fresh directory: one hosts, all see every write."""
    racers = in_threads(3, lambda _: peers())
    assert sorted(peer.hosting for peer in racers) == [False, False, True]
    for n, peer in enumerate(racers):
        peer(ADD_MEM)
        peer(f"store.upsert('mem', [item({n})])")
    assert [peer("store.count('mem')") for peer in racers] == [3, 3, 3]
    client = opened()
    assert not client.hosting
    assert client.count("mem") == 3


def test_a_clean_close_hands_the_directory_to_a_client(
    peers: Callable[..., Peer], opened: Any
) -> None:
    """The host closes and exits; the client's next call takes the directory over."""
    host = peers()
    host(ADD_MEM)
    host("store.upsert('mem', [item(n) for n in range(10)])")
    client = opened()
    assert client.count("mem") == 10
    assert host.close()
    assert client.count("mem") == 10
    assert client.hosting
    client.upsert("mem", [item(10)])
    assert client.count("mem") == 11


def test_a_killed_host_loses_no_acknowledged_point(peers: Callable[..., Peer], opened: Any) -> None:
    """SIGKILL mid-life (no close): the client takes over and has every acknowledged write."""
    host = peers()
    client = opened()
    client.ensure_collection("mem", DIM, MODEL)
    client.upsert("mem", [item(n) for n in range(10)])  # through the host
    host("store.upsert('mem', [item(n) for n in range(10, 20)])")
    host("store.upsert('mem', [item(3, note='overwritten')])")
    host.kill()
    assert host.process.returncode == -9
    assert client.count("mem") == 20
    assert client.hosting
    assert client.get("mem", [item(3).id])[0].payload["note"] == "overwritten"
    assert sorted(ns(client.scroll("mem"))) == list(range(20))


def test_clients_left_by_a_dead_host_agree_on_a_new_one(
    peers: Callable[..., Peer], opened: Any
) -> None:
    """Two clients calling at once after the host died: one takes over, the other reaches it."""
    host = peers()
    host(ADD_MEM)
    other = peers()
    client = opened()
    assert not other.hosting
    assert not client.hosting
    host.kill()

    def write(which: int) -> None:
        if which:
            client.upsert("mem", [item(1)])
        else:
            other("store.upsert('mem', [item(2)])")

    in_threads(2, write)
    assert [client.hosting, other("store.hosting")].count(True) == 1
    assert client.count("mem") == other("store.count('mem')") == 2


def test_a_host_that_closes_but_lives_on_hands_over(
    peers: Callable[..., Peer], opened: Any
) -> None:
    """The host closes its store and its process goes on (a worker whose job ended): the
    client takes over, and the old host, opening again, becomes the new host's client."""
    host = peers()
    host(ADD_MEM)
    client = opened()
    client.upsert("mem", [item(1)])
    host("store.close()")
    client.upsert("mem", [item(2)])
    assert client.hosting
    assert host("(store := open_shared_store(sys.argv[1])).hosting") is False
    host("store.upsert('mem', [item(3)])")
    assert client.count("mem") == host("store.count('mem')") == 3


def test_a_process_arriving_after_a_takeover_reaches_the_new_host(
    peers: Callable[..., Peer], opened: Any
) -> None:
    """After the client took over, a third process becomes the new host's client."""
    host = peers()
    host(ADD_MEM)
    client = opened()
    assert client.count("mem") == 0
    assert host.close()
    client.upsert("mem", [item(1)])
    assert client.hosting
    third = peers()
    assert not third.hosting
    third("store.upsert('mem', [item(2)])")
    assert third("store.count('mem')") == client.count("mem") == 2


# -- keys and errors ---------------------------------------------------------------------------


def test_a_wrong_key_is_refused_and_the_host_keeps_serving(
    tmp_path: Path, peers: Callable[..., Peer], opened: Any
) -> None:
    """A connection with another key is rejected; so is one that sends garbage; the host
    then still serves new connections."""
    host = peers()
    host(ADD_MEM)
    client = opened()
    wrong_key = Background(lambda: Client(client._address, family="AF_UNIX", authkey=b"wrong"))
    with pytest.raises(AuthenticationError):
        wrong_key.result()
    with socket.socket(socket.AF_UNIX) as garbage:
        garbage.settimeout(PEER_TIMEOUT)
        garbage.connect(client._address)
        garbage.recv(1024)  # the challenge
        garbage.sendall(b"\x00\x00\x00\x05hello")
    client.close()
    again = opened()  # a new store object: a new connection
    again.upsert("mem", [item(1)])
    assert again.count("mem") == 1
    assert host("store.count('mem')") == 1


def test_the_key_file_is_private(tmp_path: Path, opened: Any) -> None:
    """The key is random, readable by its owner only, and written whole (no temporary left)."""
    store = opened()
    assert store.hosting
    key = tmp_path / KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert len(key.read_bytes()) == 32
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    other = tmp_path / "other"
    opened(other)
    assert (other / KEY_FILE).read_bytes() != key.read_bytes()


def test_store_errors_reach_the_client_as_the_same_type(
    peers: Callable[..., Peer], opened: Any
) -> None:
    """Exceptions raised on the host arrive with their type and message; the client goes on."""
    host = peers()
    client = opened()
    client.ensure_collection("mem", DIM, MODEL)
    with pytest.raises(CollectionNotFoundError, match="'nope'"):
        client.count("nope")
    with pytest.raises(ValueError, match=f"{DIM}-dimensional"):
        client.upsert("mem", [Point(item(1).id, [1.0, 0.0], {})])
    with pytest.raises(CollectionMismatchError, match="test:other"):
        client.ensure_collection("mem", DIM, "test:other")
    with pytest.raises(ValueError, match="needs ids"):
        client.delete("mem")
    client.upsert("mem", [item(1)])
    assert client.count("mem") == 1
    assert not client.hosting
    assert host.close()


# -- threads and handles -----------------------------------------------------------------------


def test_threads_of_a_client_call_at_once(peers: Callable[..., Peer], opened: Any) -> None:
    """8 threads x 50 upserts, each followed by a search, all through the host: none lost."""
    host = peers()
    host(ADD_MEM)
    client = opened()

    def work(worker: int) -> int:
        for n in range(50):
            point = item(worker * 100 + n)
            client.upsert("mem", [point])
            hits = client.search("mem", list(point.vector), 1)
            assert hits[0].score == pytest.approx(1.0, abs=1e-4)
        return client.count("mem")

    assert all(count >= 50 for count in in_threads(8, work))
    assert not client.hosting
    ids = [item(worker * 100 + n).id for worker in range(8) for n in range(50)]
    assert len(client.get("mem", ids)) == 400
    assert host("store.count('mem')") == 400


def test_open_vector_store_shares_one_store_per_directory(tmp_path: Path) -> None:
    """A directory opens a SharedVectorStore, the same object each time in one process;
    it works until its last close, which frees the directory."""
    first = open_vector_store(tmp_path)
    assert isinstance(first, SharedVectorStore)
    assert first.hosting
    second = open_vector_store(f"{tmp_path}/./")
    assert second is first
    first.ensure_collection("mem", DIM, MODEL)
    first.close()
    second.upsert("mem", [item(1)])
    assert second.count("mem") == 1
    second.close()
    with pytest.raises(VectorStoreError, match="closed"):
        second.count("mem")
    with EdgeVectorStore(tmp_path) as engine:  # the directory's lock was released
        assert engine.count("mem") == 1


def test_a_host_closing_during_calls_loses_none(
    tmp_path: Path, peers: Callable[..., Peer], opened: Any
) -> None:
    """A call in progress when the host closes completes (answered, or resent to the next
    host); so does one another client sends once the host has stopped listening."""
    release = tmp_path.parent / f"{tmp_path.name}-release"
    slow_host = f"""
import os, time
from multiprocessing.connection import Listener
from flink_agents.integrations.vector_stores.edge import EdgeVectorStore
original_info = EdgeVectorStore.collection_info
def collection_info(self, name):
    print('["busy", null]', flush=True)
    while not os.path.exists({str(release)!r}):
        time.sleep(0.01)
    return original_info(self, name)
EdgeVectorStore.collection_info = collection_info
original_close = Listener.close
def close(self):
    original_close(self)
    print('["deaf", null]', flush=True)
Listener.close = close
"""
    host = peers(slow_host)
    other = peers()
    client = opened()
    client.ensure_collection("mem", DIM, MODEL)
    client.upsert("mem", [item(n) for n in range(5)])
    assert other("store.count('mem')") == 5  # connected, its connection idle
    in_progress = Background(lambda: client.collection_info("mem"))
    assert host.read() == ["busy", None]
    assert host.process.stdin is not None
    host.process.stdin.close()  # the host starts closing, waiting for the call
    assert host.read() == ["closing", True]
    assert host.read() == ["deaf", None]
    other.submit("store.upsert('mem', [item(5)])")  # on its open connection, while closing
    release.touch()
    info = in_progress.result()
    assert other.read() == ["ok", None]
    assert host.process.wait(PEER_TIMEOUT) == 0, host.stderr()
    assert info.name == "mem"
    assert info.points in (5, 6)  # the upsert may land first if the call was resent
    assert client.count("mem") == other("store.count('mem')") == 6
    assert [client.hosting, other("store.hosting")].count(True) == 1


# -- handshakes and closing ---------------------------------------------------------------------


def test_a_host_killed_during_the_handshake_is_taken_over(
    tmp_path: Path, peers: Callable[..., Peer], opened: Any
) -> None:
    """A host killed between accepting a connection and authenticating it: the client takes
    the directory over, as after any other death of its host."""
    # The peer holds the directory and listens on its address, but dies on its first
    # connection (ours) before answering it; it never opens a store of its own.
    dying = f"""
import os, signal, socket, threading
from pathlib import Path
from flink_agents.integrations.vector_stores.edge import EdgeVectorStore
from flink_agents.integrations.vector_stores.shared import SharedVectorStore
root = Path({str(tmp_path)!r})
engine = EdgeVectorStore(root)
engine.ensure_collection('mem', {DIM}, {MODEL!r})
listener = socket.socket(socket.AF_UNIX)
listener.bind(SharedVectorStore(root, 60.0, {{}})._address)
listener.listen()
print('["ready", true]', flush=True)
listener.accept()
os.kill(os.getpid(), signal.SIGKILL)
"""
    peers(dying)
    store = opened(timeout=PEER_TIMEOUT)
    assert store.hosting
    assert store.count("mem") == 0


def test_a_silent_connection_does_not_stop_the_host_serving(
    peers: Callable[..., Peer], opened: Any
) -> None:
    """Any local process can connect to the abstract socket; one that never answers the
    challenge must not keep other clients out."""
    host = peers()
    host(ADD_MEM)
    client = opened()
    connected: list[Any] = []
    with socket.socket(socket.AF_UNIX) as silent:
        silent.connect(client._address)
        newcomer = threading.Thread(
            target=lambda: connected.append(
                Client(client._address, family="AF_UNIX", authkey=client._authkey)
            ),
            daemon=True,
        )
        newcomer.start()
        newcomer.join(STEP_TIMEOUT)
        reached = bool(connected)
    newcomer.join(PEER_TIMEOUT)  # released once the silent connection is gone
    for connection in connected:
        connection.close()
    assert reached


def test_a_client_connecting_as_the_host_closes_does_not_hang_it(
    tmp_path: Path, peers: Callable[..., Peer]
) -> None:
    """A connection whose handshake ends while the host closes: the host still exits."""
    host = peers()
    key = (tmp_path / KEY_FILE).read_bytes()
    with socket.socket(socket.AF_UNIX) as raw:
        raw.connect(SharedVectorStore(tmp_path, PEER_TIMEOUT, {})._address)
        connection = Connection(os.dup(raw.fileno()))
        answer_challenge(connection, key)  # the host's half of the handshake, then ours
        challenge = os.urandom(20)
        connection.send_bytes(CHALLENGE + challenge)
        assert connection.recv_bytes(256) == hmac.new(key, challenge, "md5").digest()
        assert host.process.stdin is not None
        host.process.stdin.close()
        assert host.read() == ["closing", True]
        # The handshake ends while the host closes (unless it already hung up on it).
        with contextlib.suppress(OSError):
            connection.send_bytes(WELCOME)
        try:
            assert host.process.wait(STEP_TIMEOUT) == 0, host.stderr()
        finally:
            connection.close()
            if host.process.poll() is None:
                host.kill()  # hung in close(): nothing else ends it


# -- hosts that cannot serve, and addresses nobody answers ---------------------------------------

# A client whose host dies while its interpreter shuts down (its main thread has ended; its
# writer threads, which Python joins before exiting, still call the store). Python 3.12
# refuses to start threads from then on; on earlier versions the same refusal is emulated, so
# the case runs everywhere. It was a PyFlink worker cancelled on a failover, whose embedding
# threads went on writing: its takeover could not start the host's thread, left the address
# bound, and its other writer connected to that address and waited for an answer forever, so
# the process never exited and every later opener of the directory waited on it too.
_SHUTTING_DOWN_CLIENT = """
import sys, threading, time
from flink_agents.integrations.vector_stores.shared import open_shared_store
from tests.integrations.vector_stores.test_conformance import item
if sys.version_info < (3, 12):  # as 3.12 does from the moment the main thread ends
    start = threading.Thread.start
    def refusing(self):
        if threading._SHUTTING_DOWN:
            raise RuntimeError("can't create new thread at interpreter shutdown")
        start(self)
    threading.Thread.start = refusing
store = open_shared_store(sys.argv[1])
store.upsert("mem", [item(0)])  # one write answered before the threads (the later count)
def write(first):
    try:
        for n in range(first, first + 100_000):
            store.upsert("mem", [item(n % 1000)])
            time.sleep(0.002)
    except Exception as error:
        print(type(error).__name__, error, flush=True)
def announce():
    while threading.main_thread().is_alive():
        time.sleep(0.001)
    print("shutting down", flush=True)  # the interpreter joins the threads left
for first in (0, 500):
    threading.Thread(target=write, args=(first,)).start()  # not daemons: joined at exit
threading.Thread(target=announce).start()
print("hosting" if store.hosting else "client", flush=True)
"""


def test_a_client_shutting_down_when_its_host_dies_exits_and_frees_the_address(
    tmp_path: Path, peers: Callable[..., Peer], opened: Any
) -> None:
    """The client cannot serve the directory any more: its calls fail at once, it releases
    the directory and its address, it exits, and a later opener hosts."""
    host = peers()
    host(ADD_MEM)
    with (tmp_path.parent / f"{tmp_path.name}-client.err").open("w+") as errors:
        client = subprocess.Popen(
            [sys.executable, "-c", _SHUTTING_DOWN_CLIENT, str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=errors,
            cwd=REPO,
            text=True,
        )
        try:
            assert client.stdout is not None
            assert client.stdout.readline() == "client\n"
            assert client.stdout.readline() == "shutting down\n"
            host.kill()
            assert client.wait(STEP_TIMEOUT) == 0
            output = client.stdout.read()
        finally:
            if client.poll() is None:
                client.kill()  # hung: nothing else ends it
                client.wait()
            errors.seek(0)
            stderr = errors.read()
    assert output.count("cannot serve it to others") == 2, output + stderr
    store = opened(timeout=STEP_TIMEOUT)
    assert store.hosting
    assert store.count("mem") > 0


def test_an_address_nobody_answers_on_is_not_waited_for(
    tmp_path: Path, peers: Callable[..., Peer], opened: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process listens on the store's address and never accepts (the directory free): an
    opener gives up on it within its timeout, naming it, instead of waiting; once that
    process is gone the opener hosts."""
    squatter = f"""
import socket, time
from pathlib import Path
from flink_agents.integrations.vector_stores.shared import SharedVectorStore
listener = socket.socket(socket.AF_UNIX)
listener.bind(SharedVectorStore(Path({str(tmp_path)!r}), 60.0, {{}})._address)
listener.listen(1)
print('["ready", false]', flush=True)
time.sleep(3600)
"""
    monkeypatch.setattr("flink_agents.integrations.vector_stores.shared.HANDSHAKE_TIMEOUT_S", 0.2)
    peer = peers(squatter)
    try:
        opening = Background(lambda: opened(timeout=1.0))
        with pytest.raises(StoreLockedError, match="address is taken"):
            opening.result(time.monotonic() + STEP_TIMEOUT)
    finally:
        peer.kill()
    assert opened(timeout=STEP_TIMEOUT).hosting


def test_a_host_that_cannot_start_a_thread_hangs_up_and_stops_listening(
    opened: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host that cannot start the thread a new connection needs (its interpreter shuts
    down) hangs that connection up and stops listening, so clients find no host rather
    than one that never answers; its own calls go on."""
    store = opened()
    store.ensure_collection("mem", DIM, MODEL)
    start = threading.Thread.start

    def refusing(thread: threading.Thread) -> None:
        if thread.name == "flink-agents-store-call":
            raise RuntimeError("can't create new thread at interpreter shutdown")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", refusing)
    with socket.socket(socket.AF_UNIX) as raw:
        raw.settimeout(STEP_TIMEOUT)
        raw.connect(store._address)
        assert raw.recv(1024) == b""  # hung up, not left waiting
    deadline = time.monotonic() + STEP_TIMEOUT
    while True:
        with socket.socket(socket.AF_UNIX) as late:
            late.settimeout(STEP_TIMEOUT)
            try:
                late.connect(store._address)
            except ConnectionRefusedError:
                break
        assert time.monotonic() < deadline, "the host still listens"
        time.sleep(0.01)
    store.upsert("mem", [item(1)])
    assert store.count("mem") == 1
