"""The flink-agents command: demo, run with an error output, validate, compile."""

import json
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from flink_agents.cli import main
from flink_agents.cli._demo import run_demo

REPO = Path(__file__).resolve().parents[2]


def test_demo_runs_the_bundled_data_and_prints_a_summary(tmp_path):
    console = Console(record=True, width=200)
    report = run_demo(
        REPO / "plans/support_triage.yaml", REPO / "data/support_tickets.jsonl", tmp_path, console
    )
    text = console.export_text()
    assert "records read 42" in text and "rejected 2" in text and "keys 6" in text
    assert "short-term memory" in text and '"profile"' in text
    outputs = [json.loads(x) for x in (tmp_path / "outputs.jsonl").read_text().splitlines()]
    errors = [json.loads(x) for x in (tmp_path / "errors.jsonl").read_text().splitlines()]
    assert len(outputs) == report.outputs > 0
    assert sum("escalation" in o for o in outputs) >= 3
    assert [(e["kind"], e["line"]) for e in errors] == [("rejected", 12), ("rejected", 24)]
    assert sum(report.runner.runs(k) for k in report.runner.keys) == 40


def test_run_sends_bad_lines_and_failed_runs_to_the_error_output(tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text(
        '{"id": "T-1", "user": "a", "text": "refund please"}\n'
        "not json\n"
        "[1, 2]\n"
        '{"user": "b", "text": "no id field makes classify raise"}\n'
        '{"id": "T-2", "user": "a", "text": "invoice is wrong"}\n'
    )
    out, err = tmp_path / "out.jsonl", tmp_path / "err.jsonl"
    code = main(
        ["run", str(REPO / "plans/support_triage.yaml"), str(data), "--key", "user",
         "--output", str(out), "--errors", str(err)]
    )
    assert code == 1  # a run failed
    assert [json.loads(x)["ticket"] for x in out.read_text().splitlines()] == ["T-1", "T-2"]
    errors = [json.loads(x) for x in err.read_text().splitlines()]
    assert [e["kind"] for e in errors] == ["rejected", "rejected", "failed_run"]
    assert errors[0]["reason"].startswith("invalid JSON")
    assert errors[1]["reason"] == "expected a JSON object, got list"
    assert errors[2]["action"] == "classify" and errors[2]["key"] == "b"
    assert errors[2]["error"] == "KeyError: 'id'"


def test_validate_reports_ok_and_errors(tmp_path, capsys):
    assert main(["validate", str(REPO / "plans/support_triage.yaml")]) == 0
    assert "agent 'support_triage' is valid (3 actions)" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nactions: []\n")
    assert main(["validate", str(bad)]) == 2
    assert "field 'actions': a plan needs at least one action" in capsys.readouterr().err


def test_compile_prints_a_plan_that_loads(tmp_path):
    target = tmp_path / "greeter.yaml"
    assert main(["compile", "tests.plan.agents:GreeterAgent", "-o", str(target)]) == 0
    assert "tests.plan.agents:GreeterAgent.greet" in target.read_text()


def test_demo_command_in_a_subprocess(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "flink_agents", "demo", "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=True,
    )
    assert "records read 42" in result.stdout
    assert (tmp_path / "outputs.jsonl").exists()
