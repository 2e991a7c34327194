"""``flink-agents demo --approvals``: the refund agent (``flink_agents/examples/refunds.py``)
over the bundled requests and approvals, in the local runner and in MiniCluster: the same
decisions, follow-ups and timeouts whatever the order in which the two inputs meet."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from flink_agents.cli import main
from flink_agents.cli._approvals import APPROVALS, PLAN, REQUESTS, counts, decisions
from flink_agents.cli._approvals import run_approvals_demo as run_demo
from flink_agents.cli._demo import DemoModel, with_model
from flink_agents.examples.refunds import Approval, stand_in_rules
from flink_agents.plan import load_plan
from flink_agents.runtime import LocalRunner
from flink_agents.runtime.internal import parse_json_object
from flink_agents.testing.llm_server import STAND_IN_MODEL, ScriptedLLMServer

REPO = Path(__file__).resolve().parents[2]

DECISIONS = {
    "R-1": "approved by the agent",
    "R-2": "approved by sam",
    "R-3": "refused by sam",
    "R-4": "approved by kim",
    "R-5": "escalated: no answer in 4 h",
    "R-6": "approved by the agent",
    "R-7": "approved by kim",
}


@pytest.fixture
def no_model_configured(monkeypatch):
    """The demo must not reach a real model from the test machine's environment."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(REPO)  # (the demo's plan and data are relative to the project)


def _check(summary: dict, text: str) -> None:
    assert decisions(summary["outputs"]) == DECISIONS
    figures = counts(summary)
    assert figures["requests"] == 7 and figures["auto-approved"] == 2
    assert (figures["approved by a person"], figures["refused by a person"]) == (3, 1)
    assert figures["escalated (no answer in 4 h)"] == figures["waits timed out"] == 1
    assert figures["follow-ups sent"] == 5  # one per approval, three days later
    # A run waits unless its approval came first: every approval answered one or was kept.
    assert figures["waits answered"] + figures["approvals before their request"] == 4
    assert figures["waits"] == figures["waits answered"] + figures["waits timed out"]
    assert figures["model calls"] == figures["waits"]  # a request drafted per wait
    assert summary["errors"] == [] and summary["stand_in"]
    assert "TEST STAND-IN" in text and "Refund decisions" in text
    assert "follow-ups sent 5" in text and "waits timed out 1" in text


def test_the_approvals_demo_on_the_local_runner(tmp_path, no_model_configured):
    console = Console(record=True, width=200)
    summary = run_demo(tmp_path, console, local=True)
    _check(summary, console.export_text())
    assert counts(summary)["waits"] == 5  # (the approvals come after the requests here)


@pytest.mark.flink
def test_the_approvals_demo_in_minicluster_decides_as_the_local_runner(
    tmp_path, no_model_configured
):
    console = Console(record=True, width=200)
    summary = run_demo(tmp_path, console)
    _check(summary, console.export_text())


def test_an_approval_before_its_request_decides_it_the_same(no_model_configured):
    server = ScriptedLLMServer(stand_in_rules()).start()
    try:
        model = DemoModel(STAND_IN_MODEL, server.base_url, None, server)
        runner = LocalRunner(with_model(load_plan(PLAN), model))
        for line in APPROVALS.read_text().splitlines():  # all of them first
            approval = parse_json_object(line)
            runner.signal(
                approval["customer"],
                Approval.model_validate({k: v for k, v in approval.items() if k != "customer"}),
            )
        outputs = []
        for line in REQUESTS.read_text().splitlines():
            request = parse_json_object(line)
            outputs += runner.run(request["customer"], request)
        outputs += runner.finish()
    finally:
        server.stop()
    assert decisions(outputs) == DECISIONS
    assert server.call_count("chat") == 1  # only R-5 asked anyone: the others knew already
    assert runner.metrics.snapshot()["numOfWaits"] == 1


def test_approvals_runs_its_own_plan(capsys):
    assert main(["demo", "--approvals", "--plan", "plans/support_replies.yaml"]) == 2
    assert "--approvals runs its own plan and data" in capsys.readouterr().err
