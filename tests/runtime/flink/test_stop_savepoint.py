"""A stop with a savepoint ends cleanly (issue 40): the calls in flight are waited for and
recorded, no thread of ours is left running, and the restore pays none of them again.

PyFlink calls a Python function's ``close`` only when its input ends, which a stop without
drain never reaches; in thread mode nothing else told the agent, and its threads went on in
the JVM after the job was reported finished. Each mode runs in a child process
(``stop_savepoint_job.py``): four keys, each with one call held by the scripted server (two
on the executor, two on the call loop), stopped with a savepoint while all four are in
flight; then restored from it with one more record per key.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from flink_agents.runtime.flink import read_json_files
from flink_agents.testing.llm_server import Rule, ScriptedLLMServer
from tests.children import run_child_job
from tests.runtime.flink.runners import MODES

pytestmark = [pytest.mark.slow, pytest.mark.flink]

HOLD_S = 3.0
"""How long the server holds each call of the first batch: longer than a stop takes."""
FIRST = [{"id": i, "key": f"k{i}", "via": "loop" if i % 2 else "executor"} for i in range(4)]
SECOND = [{"id": 10 + i, "key": f"k{i}", "via": "executor"} for i in range(4)]


@pytest.mark.parametrize("mode", MODES)
def test_a_stop_with_a_savepoint_records_the_calls_in_flight_and_leaves_no_thread(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if mode == "process":
        # Real worker processes, not PyFlink's default for MiniCluster (loopback: the
        # "workers" are threads of the client's process).
        monkeypatch.setenv("_python_worker_execution_mode", "process")
    (tmp_path / "input").mkdir()
    with ScriptedLLMServer([Rule(reply_text="answer to {last_user}")]) as server:
        server.delay_next(len(FIRST), seconds=HOLD_S)
        spec = {
            "mode": mode,
            "job": "stop-savepoint",
            "savepoint_dir": (tmp_path / "savepoints").as_uri(),
            "input_dir": str(tmp_path / "input"),
            "output_dir": str(tmp_path / "out"),
            "data_dir": str(tmp_path / "data"),
            "base_url": server.base_url,
            "started": str(tmp_path / "started.txt"),
            "first": FIRST,
            "second": SECOND,
        }
        spec_file = tmp_path / "spec.json"
        spec_file.write_text(json.dumps(spec))
        result = run_child_job("tests.runtime.flink.stop_savepoint_job", spec_file, mode)
        asked = Counter(call.request["messages"][-1]["content"] for call in server.calls)

    first_answers = {f"answer to question {r['id']}" for r in FIRST}
    # Recorded by the time the job was reported finished (thread mode), or by the time its
    # worker, which Flink left to itself, exited (process mode).
    assert first_answers <= set(result["recorded"])
    if mode == "thread":
        assert result["threads"] == []
    else:
        assert result["workers"] and result["workers_left"] == []
    # The restore answered the calls from the log: each question was asked once.
    assert asked == Counter(f"question {r['id']}" for r in FIRST + SECOND)
    outputs = read_json_files(tmp_path / "out")
    assert sorted(o["id"] for o in outputs) == sorted(r["id"] for r in FIRST + SECOND)
    assert {o["answer"] for o in outputs if o["id"] < 10} == first_answers
