"""``short-term-memory-ttl`` on Flink, in both execution modes, with a TTL of seconds: a key
left idle longer loses its short-term memory (its expiry check's timer fires, so a savepoint
holds none of it) and starts counting afresh, while a key with a record every so often
keeps its memory throughout (``ttl_job.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flink_agents.runtime.flink import read_json_files
from tests.runtime.flink.runners import MODES
from tests.runtime.flink.test_forget_key import run_job, savepoint_bytes
from tests.runtime.test_forget_key import KEPT, SECRET, event_lines

pytestmark = [pytest.mark.slow, pytest.mark.flink]

TTL_S = 3.0
BEAT_S = 1.0
BEATS = 6
"""Records of the busy key, ``BEAT_S`` apart: twice the TTL in all, the other key idle."""


def _spec(mode: str, directory: Path) -> dict:
    (directory / "input").mkdir(parents=True)
    return {
        "mode": mode,
        "input_dir": str(directory / "input"),
        "output_dir": str(directory / "out"),
        "data_dir": str(directory / "data"),
        "savepoint_dir": (directory / "savepoints").as_uri(),
        "ttl_s": TTL_S,
        "beat_s": BEAT_S,
        "first": [
            {"id": 1, "user": "alice", "text": f"{SECRET} one"},
            {"id": 2, "user": "alice", "text": f"{SECRET} two"},
            {"id": 10, "user": "bob", "text": f"{KEPT} 0"},
        ],
        "beats": [{"id": 11 + n, "user": "bob", "text": f"{KEPT} {n + 1}"} for n in range(BEATS)],
        "last": [
            {"id": 3, "user": "alice", "text": "fresh"},
            {"id": 30, "user": "bob", "text": f"{KEPT} last"},
        ],
    }


@pytest.mark.parametrize("mode", MODES)
def test_an_idle_keys_memory_expires(mode, tmp_path, monkeypatch):
    spec = _spec(mode, tmp_path)
    result = run_job("tests.runtime.flink.ttl_job", spec, tmp_path, monkeypatch)

    counts = {o["id"]: o["count"] for o in read_json_files(tmp_path / "out")}
    assert (counts[1], counts[2]) == (1, 2)
    assert counts[3] == 1  # alice was idle for more than the TTL: she starts afresh
    # Bob never was: his count went on.
    assert [counts[i] for i in (10, *range(11, 11 + BEATS), 30)] == list(range(1, BEATS + 3))

    savepoint = savepoint_bytes(result)
    assert f"{KEPT} last".encode() in savepoint and b"fresh" in savepoint
    assert SECRET.encode() not in savepoint
    expired = [
        json.loads(line) for line in event_lines(Path(spec["data_dir"])) if "memory_expired" in line
    ]
    assert [(e["key"], e["run"]) for e in expired] == [("alice", 2)]
    # Its check's timer expired it, before her next record came.
    assert expired[0]["ts"] < result["last_at"] * 1000
