"""Budgets, fallbacks' replay and rate limits on Flink, in both execution modes, with a
failure injected while the budgets' windows are half spent (``spend_job.py``): each limit
holds exactly where it does on the local runner, no model is paid twice, and the paced
model's measured rate is its limit."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from flink_agents.runtime.flink import read_json_files
from flink_agents.testing.llm_server import Rule, ScriptedLLMServer
from tests.children import run_child_job
from tests.integrations.spend_agents import PACE
from tests.runtime.flink.runners import MODES

pytestmark = [pytest.mark.slow, pytest.mark.flink]

BURST = 40
WAIT_WINDOW_S = 2.0


def asks(key: str, *texts: str) -> list[dict]:
    return [{"k": key, "text": text} for text in texts]


def _spec(mode: str, directory: Path) -> dict:
    (directory / "input").mkdir(parents=True)
    crash = {"k": "c", "text": "crash", "crash": str(directory / "crashed")}
    return {
        "mode": mode,
        "input_dir": str(directory / "input"),
        "output_dir": str(directory / "out"),
        "error_dir": str(directory / "errors"),
        "data_dir": str(directory / "data"),
        "agent_calls": 3,
        "wait_window_s": WAIT_WINDOW_S,
        "first": asks("a", "a1", "a2", "a3", "a4")
        + asks("b", "b1")
        + [{"k": "w", "text": f"w{n}", "model": "last"} for n in (1, 2, 3)],
        "second": [*asks("a", "a5"), crash, *asks("c", "c1"), *asks("a", "a6"), *asks("b", "b2")],
        "burst": [{"k": f"r{n}", "text": f"r{n}"} for n in range(BURST)],
    }


@pytest.mark.parametrize("mode", MODES)
def test_budgets_and_rate_limits_hold_across_a_failure(mode, tmp_path, monkeypatch):
    models = ("primary", "backup", "last")
    rules = [Rule(model=m, reply_text=f"{m}: {{last_user}}") for m in models]
    with ScriptedLLMServer(rules) as server:
        monkeypatch.setenv("TEST_LLM_URL", server.base_url)
        monkeypatch.setenv("TEST_LLM_KEY", "sk-spend-flink-9753")
        if mode == "process":
            monkeypatch.setenv("_python_worker_execution_mode", "process")
        spec = _spec(mode, tmp_path)
        spec_file = tmp_path / "spec.json"
        spec_file.write_text(json.dumps(spec))
        run_child_job("tests.runtime.flink.spend_job", spec_file, mode)
        calls = server.calls

    assert (tmp_path / "crashed").exists()  # the failure happened
    by = {o["text"].partition(": ")[2]: o["by"] for o in read_json_files(tmp_path / "out")}
    assert {
        text: by[text] for text in ("a1", "a2", "a3", "a4", "a5", "b1", "b2", "c1", "crash")
    } == {
        "a1": "primary",
        "a2": "primary",
        "a3": "backup",  # a's per-key budget switched it
        "a4": "backup",
        "a5": "backup",
        "b1": "primary",
        "b2": "primary",
        "c1": "primary",
        "crash": "primary",
    }
    assert all(by[f"r{n}"] == "primary" for n in range(BURST))
    [error] = read_json_files(tmp_path / "errors")
    assert error["input"]["text"] == "a6"
    assert "agent budget 'agent-calls': spent 3 of 3 calls" in error["error"]
    # Paid once each, the failure notwithstanding.
    asked = Counter(
        (call.request["model"], call.request["messages"][-1]["content"]) for call in calls
    )
    assert [asked_twice for asked_twice, n in asked.items() if n > 1] == []
    answered = Counter(call.request["model"] for call in calls if call.status == 200)
    # a's two, b's two, c's two (the record that failed the job runs once it is read again).
    assert answered == {"primary": 2 + 2 + 2 + BURST, "backup": 3, "last": 3}
    # w's calls to "last" waited for a window each.
    waited = [call.at for call in calls if call.request["model"] == "last"]
    assert len({int(at // WAIT_WINDOW_S) for at in waited}) == 3
    assert all(by[f"w{n}"] == "last" for n in (1, 2, 3))
    burst = sorted(
        call.at for call in calls if call.request["messages"][-1]["content"].startswith("r")
    )
    rate = (len(burst) - 1) / (burst[-1] - burst[0]) * 60
    assert rate == pytest.approx(PACE, rel=0.05)
