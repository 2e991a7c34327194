"""Embedded store specifics: one opener per directory, durability, layout and optimizing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from flink_agents.integrations.vector_stores import (
    DEFAULT_INDEXES,
    FieldType,
    StoreLockedError,
    open_vector_store,
)
from flink_agents.integrations.vector_stores import edge as edge_module
from flink_agents.integrations.vector_stores.client import QdrantClientVectorStore
from flink_agents.integrations.vector_stores.edge import METADATA_FILE, EdgeVectorStore
from flink_agents.integrations.vector_stores.shared import SharedVectorStore
from tests.integrations.vector_stores.conftest import DIM, MODEL, unit
from tests.integrations.vector_stores.test_conformance import fill, item

REPO = Path(__file__).resolve().parents[3]


def run_child(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (another process, as a second Flink worker is)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )


def test_second_open_in_the_same_process_is_refused(tmp_path: Path) -> None:
    """A second EdgeVectorStore on an open directory fails and points at shared()."""
    with EdgeVectorStore(tmp_path), pytest.raises(StoreLockedError, match="shared"):
        EdgeVectorStore(tmp_path / "." / "")


def test_shared_hands_out_the_open_store_until_the_last_close(tmp_path: Path) -> None:
    """shared() returns the same object; it stays usable until every opener closed it."""
    first = EdgeVectorStore.shared(tmp_path)
    second = EdgeVectorStore.shared(str(tmp_path))
    assert first is second
    first.ensure_collection("mem", DIM, MODEL)
    first.close()
    second.upsert("mem", [item(1)])
    assert second.count("mem") == 1
    second.close()
    with EdgeVectorStore(tmp_path) as third:  # the directory is free again
        assert third.count("mem") == 1


def test_another_process_cannot_open_an_open_directory(tmp_path: Path) -> None:
    """A second process gets StoreLockedError while the store is open, and succeeds after."""
    child = f"""
        from flink_agents.integrations.vector_stores.edge import EdgeVectorStore
        from flink_agents.integrations.vector_stores import StoreLockedError
        try:
            EdgeVectorStore({str(tmp_path)!r}).close()
            print("opened")
        except StoreLockedError as error:
            print("locked:", error)
    """
    with EdgeVectorStore(tmp_path):
        result = run_child(child)
        assert "locked:" in result.stdout, result.stderr
        assert "another process" in result.stdout
    result = run_child(child)
    assert result.stdout.strip() == "opened", result.stderr


def test_acknowledged_writes_survive_a_killed_process(tmp_path: Path) -> None:
    """Points upserted before a kill -9 (no close, no flush) are there on reopen."""
    child = f"""
        import os, signal
        from flink_agents.integrations.vector_stores.edge import EdgeVectorStore
        from tests.integrations.vector_stores.test_conformance import item
        store = EdgeVectorStore({str(tmp_path)!r})
        store.ensure_collection("mem", {DIM}, {MODEL!r})
        store.upsert("mem", [item(n) for n in range(20)])
        store.upsert("mem", [item(3, note="overwritten")])
        os.kill(os.getpid(), signal.SIGKILL)
    """
    result = run_child(child)
    assert result.returncode == -9, result.stderr
    with EdgeVectorStore(tmp_path) as store:
        assert store.count("mem") == 20
        assert store.get("mem", [item(3).id])[0].payload["note"] == "overwritten"


def test_layout_and_metadata_file(tmp_path: Path) -> None:
    """Each collection is a directory with its model record; the lock file holds our pid."""
    with EdgeVectorStore(tmp_path) as store:
        store.ensure_collection("mem", DIM, MODEL, indexes={"rank": "float"})
        store.ensure_collection("kb", 8, "test:kb")
        meta = json.loads((tmp_path / "mem" / METADATA_FILE).read_text())
        assert meta["dimension"] == DIM
        assert meta["model_id"] == MODEL
        assert meta["indexes"] == {
            **{k: str(v) for k, v in DEFAULT_INDEXES.items()},
            "rank": "float",
        }
        assert (tmp_path / "kb" / "shard").is_dir()
        assert store.collections() == ["kb", "mem"]


def test_a_collection_interrupted_before_its_shard_is_completed(tmp_path: Path) -> None:
    """Metadata without a shard (a crash mid-create) gets its shard and indexes on open."""
    with EdgeVectorStore(tmp_path) as store:
        store.ensure_collection("mem", DIM, MODEL)
    shutil.rmtree(tmp_path / "mem" / "shard")
    with EdgeVectorStore(tmp_path) as store:
        store.upsert("mem", [item(1)])
        assert store.count("mem") == 1
        assert store.collection_info("mem").indexes == DEFAULT_INDEXES


def test_drop_removes_the_directory_and_old_tombstones(tmp_path: Path) -> None:
    """drop_collection leaves no files; a tombstone left by a crash is cleared on open."""
    (tmp_path / ".dropped-old-123").mkdir(parents=True)
    with EdgeVectorStore(tmp_path) as store:
        assert not (tmp_path / ".dropped-old-123").exists()
        store.ensure_collection("mem", DIM, MODEL)
        fill(store, "mem", 3)
        assert store.drop_collection("mem")
        assert sorted(p.name for p in tmp_path.iterdir()) == [".lock"]


def test_optimize_keeps_results(tmp_path: Path) -> None:
    """optimize() changes how the engine searches, not what it finds."""
    with EdgeVectorStore(tmp_path) as store:
        store.ensure_collection("mem", DIM, MODEL)
        fill(store, "mem", 40)
        before = [h.id for h in store.search("mem", unit(1, 0.3), 10)]
        store.optimize()
        store.optimize("mem")
        assert [h.id for h in store.search("mem", unit(1, 0.3), 10)] == before
        assert store.count("mem") == 40


def test_optimize_every_counts_upserted_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With optimize_every=50, upserting 120 points in batches of 20 optimizes twice."""
    with EdgeVectorStore(tmp_path, optimize_every=50) as store:
        calls: list[str] = []
        original = store._optimize
        monkeypatch.setattr(store, "_optimize", lambda c: (calls.append(c.name), original(c)))
        store.ensure_collection("mem", DIM, MODEL)
        for start in range(0, 120, 20):
            store.upsert("mem", [item(n) for n in range(start, start + 20)])
        assert calls == ["mem", "mem"]
        assert store.count("mem") == 120


class CountingFlushes:
    """The engine's shard, its flushes counted (each still runs)."""

    def __init__(self, shard: object) -> None:
        self._shard = shard
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        self._shard.flush()

    def __getattr__(self, name: str) -> object:
        return getattr(self._shard, name)


def test_a_write_flushes_its_collection_once_its_last_flush_is_an_interval_ago(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Upserts, payload updates and deletes flush the collection (so that the engine's
    write-ahead log is truncated) when its last flush, or its opening, is at least
    ``flush_interval_s`` ago: one flush a write at most, none in between."""
    clock = [100.0]
    monkeypatch.setattr(edge_module, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    with EdgeVectorStore(tmp_path, flush_interval_s=5.0) as store:
        store.ensure_collection("mem", DIM, MODEL)
        shard = store._collections["mem"].shard = CountingFlushes(store._collections["mem"].shard)
        store.upsert("mem", [item(n) for n in range(10)])
        clock[0] = 104.9
        store.set_payload("mem", [item(1).id], {"text": "changed"})
        assert shard.flushes == 0
        clock[0] = 105.0
        store.upsert("mem", [item(n) for n in range(10, 20)])
        assert shard.flushes == 1
        clock[0] = 109.0
        store.delete("mem", [item(0).id])
        assert shard.flushes == 1
        clock[0] = 110.0
        store.delete("mem", [item(1).id])
        assert shard.flushes == 2
        assert store.count("mem") == 18
    with EdgeVectorStore(tmp_path) as store:  # and all of it was kept
        assert store.count("mem") == 18


def test_without_a_flush_interval_writes_never_flush(tmp_path: Path) -> None:
    with EdgeVectorStore(tmp_path, flush_interval_s=None) as store:
        store.ensure_collection("mem", DIM, MODEL)
        shard = store._collections["mem"].shard = CountingFlushes(store._collections["mem"].shard)
        store.upsert("mem", [item(n) for n in range(10)])
        store.delete("mem", [item(0).id])
        assert shard.flushes == 0
    with pytest.raises(ValueError, match="flush_interval_s"):
        EdgeVectorStore(tmp_path, flush_interval_s=-1)


def test_extra_indexes_are_added_to_an_existing_collection(tmp_path: Path) -> None:
    """An index asked for later is created in the engine and survives a reopen."""
    with EdgeVectorStore(tmp_path) as store:
        store.ensure_collection("mem", DIM, MODEL)
        store.ensure_collection("mem", DIM, MODEL, indexes={"rank": FieldType.INTEGER})
    with EdgeVectorStore(tmp_path) as store:
        assert store.collection_info("mem").indexes["rank"] is FieldType.INTEGER


def test_open_vector_store_picks_the_backend(tmp_path: Path) -> None:
    """A path opens (or shares) the embedded store, hosted by its first opener over an
    EdgeVectorStore of this process; ':memory:' the client's local mode."""
    with open_vector_store(tmp_path) as store:
        assert isinstance(store, SharedVectorStore)
        assert store.hosting
        with pytest.raises(StoreLockedError, match="already open in this process"):
            EdgeVectorStore(tmp_path)  # the engine underneath holds the directory
        with open_vector_store(str(tmp_path)) as again:
            assert again is store
    with open_vector_store(":memory:") as local:
        assert isinstance(local, QdrantClientVectorStore)
        assert local.local
    with pytest.raises(ValueError, match="api_key"):
        open_vector_store(tmp_path, api_key="secret")
