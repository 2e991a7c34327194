"""Forgetting a key on Flink, in both execution modes: after a ``ForgetKey`` record and a
failure right after it (the erasure runs again from a restored checkpoint), nothing of the
key is left in a savepoint taken next, in the action log, in long-term memory, in knowledge
or in the event log, while the other key keeps everything (``forget_job.py``)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from flink_agents.runtime.flink import read_json_files
from tests.children import run_child_job
from tests.runtime.flink.runners import MODES
from tests.runtime.test_forget_key import (
    KEPT,
    SECRET,
    event_lines,
    log_bytes,
    log_rows,
    stored_texts,
)

pytestmark = [pytest.mark.slow, pytest.mark.flink]

TIMER_KEY = pickle.dumps("alice", protocol=5)
"""Her key as a timer of the Python operator holds it: pickled."""

LOG = "action-log.db"
"""The job's action log, under its data directory (the default)."""


def _paths(directory: Path) -> dict:
    """The spec's directories, under ``directory``."""
    (directory / "input").mkdir(parents=True)
    return {
        "input_dir": str(directory / "input"),
        "output_dir": str(directory / "out"),
        "data_dir": str(directory / "data"),
        "savepoint_dir": (directory / "savepoints").as_uri(),
    }


def _spec(mode: str, directory: Path) -> dict:
    records = []
    for user, marker, first in (("alice", SECRET, 1), ("bob", KEPT, 10)):
        records += [
            {"id": first, "user": user, "text": f"{marker} one", "long_term": True},
            {"id": first + 1, "user": user, "text": f"{marker} two", "follow_up": True},
            {"id": first + 2, "user": user, "text": f"{marker} three", "ask": True},
        ]
    return {
        "mode": mode,
        "job": "forget",
        **_paths(directory),
        "records": records,
        "then": [
            {"forget": "alice", "request_id": "ticket-9"},
            {"id": 20, "user": "bob", "text": f"{KEPT} four", "crash": str(directory / "c")},
        ],
    }


def run_job(module: str, spec: dict, directory: Path, monkeypatch) -> dict:
    """Run the job ``module`` (``forget_job``, ``ttl_job``) in a child process with
    ``spec``, in its mode; its result."""
    if spec["mode"] == "process":
        monkeypatch.setenv("_python_worker_execution_mode", "process")
    spec_file = directory / "spec.json"
    spec_file.write_text(json.dumps(spec))
    return run_child_job(module, spec_file, spec["mode"])


def savepoint_bytes(result: dict) -> bytes:
    """Every byte of the savepoint a job's result names."""
    files = Path(result["savepoint"].removeprefix("file:")).rglob("*")
    return b"".join(file.read_bytes() for file in files if file.is_file())


@pytest.mark.parametrize("mode", MODES)
def test_nothing_of_a_forgotten_key_is_left(mode, tmp_path, monkeypatch):
    spec = _spec(mode, tmp_path)
    result = run_job("tests.runtime.flink.forget_job", spec, tmp_path, monkeypatch)
    data = Path(spec["data_dir"])

    # The failure happened, and both keys' records ran (outputs are the user's: kept).
    assert (tmp_path / "c").exists()
    outputs = read_json_files(tmp_path / "out")
    assert {o["id"] for o in outputs} == {1, 2, 10, 11, 20}

    # Flink state: a savepoint taken after the erasure holds nothing of alice (no memory,
    # no waiting run, no scheduled event; in thread mode no timer, so not even her key), and
    # bob's state (the search finds a key's bytes).
    savepoint = savepoint_bytes(result)
    assert b"bob" in savepoint and KEPT.encode() in savepoint
    assert SECRET.encode() not in savepoint
    if mode == "thread":
        assert b"alice" not in savepoint
    else:
        # Process mode cannot delete a timer restored from a checkpoint (PyFlink 2.3, as it
        # cannot fire one: docs/consistency.md). When Flink restored a checkpoint taken
        # before the erasure, her timers stay in the timer service: her key, pickled, with
        # their times. Nothing else of hers may be there.
        assert savepoint.count(b"alice") == savepoint.count(TIMER_KEY)

    # The action log, long-term memory and knowledge, the event log.
    assert log_rows(data, "alice", LOG) == 0 and log_rows(data, "bob", LOG) > 0
    raw = log_bytes(data, LOG)
    assert SECRET.upper().encode() not in raw and SECRET.encode() not in raw
    stored = stored_texts(data)
    assert SECRET not in stored and KEPT in stored
    lines = event_lines(data)
    assert not [line for line in lines if "alice" in line or SECRET in line]
    assert [line for line in lines if KEPT in line]
    confirmations = [json.loads(line) for line in lines if '"key_forgotten"' in line]
    assert confirmations and all(c["request_id"] == "ticket-9" for c in confirmations)


def test_a_savepoint_taken_right_after_an_erasure_holds_nothing_of_the_key(tmp_path, monkeypatch):
    """A record of alice, her erasure and a record of bob, in one file; the job is stopped
    with a savepoint as soon as bob's output is committed, within a second of the erasure,
    when the timers that her run's durable call left (its polls) would still be due: they
    went with her (they had not: the savepoint held her key in a timer). Thread mode, which
    deletes timers."""
    spec = {
        "mode": "thread",
        "job": "forget-at-once",
        **_paths(tmp_path),
        "records": [{"id": 10, "user": "bob", "text": f"{KEPT} one"}],
        "then": [
            {"id": 1, "user": "alice", "text": f"{SECRET} one"},
            {"forget": "alice", "request_id": "ticket-3"},
            {"id": 20, "user": "bob", "text": f"{KEPT} two"},
        ],
    }
    result = run_job("tests.runtime.flink.forget_job", spec, tmp_path, monkeypatch)
    assert {o["id"] for o in read_json_files(tmp_path / "out")} == {1, 10, 20}
    savepoint = savepoint_bytes(result)
    assert b"bob" in savepoint and KEPT.encode() in savepoint
    assert b"alice" not in savepoint


def test_the_main_job_takes_erasure_requests_from_files_of_their_own(tmp_path):
    """``JobPaths.forget`` (``--forget`` of ``jobs/agent_job.py``): each line a request,
    made a ``ForgetKey``; a line without a key, or whose ``request_id`` is not text, goes
    to the error output. (The two inputs are not ordered against each other: the test
    asks only that the requests reached the agent.)"""
    from flink_agents.plan import to_plan
    from flink_agents.runtime.flink import JobPaths, build_agent_job
    from tests.runtime.flink.runners import flink_environment
    from tests.runtime.forgetting_agents import Remembers

    (tmp_path / "in.jsonl").write_text(
        "".join(json.dumps({"user": u, "text": f"{u} note"}) + "\n" for u in ("alice", "bob"))
    )
    requests = [{"key": "alice", "request_id": "t-1"}, {"key": "carol"}, {"id": 3}]
    requests.append({"key": "dave", "request_id": 7})
    (tmp_path / "forget.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requests))
    paths = JobPaths(
        tmp_path / "in.jsonl",
        tmp_path / "out",
        tmp_path / "err",
        forget=tmp_path / "forget.jsonl",
    )
    env = flink_environment(parallelism=1)
    build_agent_job(
        env,
        to_plan(Remembers),
        paths,
        "user",
        checkpoint_interval_ms=300,
        data_dir=str(tmp_path / "data"),
        event_log_level="standard",
    )
    env.execute("forget-requests")
    confirmations = [
        json.loads(line) for line in event_lines(tmp_path / "data") if '"key_forgotten"' in line
    ]
    assert sorted(str(c["request_id"]) for c in confirmations) == ["None", "t-1"]
    errors = sorted(read_json_files(tmp_path / "err"), key=lambda e: e["reason"])
    assert [(e["kind"], e["reason"]) for e in errors] == [
        ("rejected", "record has no key field 'key'"),
        ("rejected", "request_id is a str or None, got int"),
    ]
    assert (errors[0]["line"], errors[1]["input"]) == (3, {"key": "dave", "request_id": 7})
    assert {o["user"] for o in read_json_files(tmp_path / "out")} == {"alice", "bob"}
