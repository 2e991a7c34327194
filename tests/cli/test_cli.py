"""The flink-agents command: demo, run with an error output, validate, compile."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from flink_agents.cli import main
from flink_agents.cli._demo import run_demo

REPO = Path(__file__).resolve().parents[2]


def _check_demo(summary, text, outputs_dir: Path, errors_dir: Path):
    assert "records in 42" in text and "rejected 2" in text and "keys 6" in text
    assert "runs 40" in text and "short-term memory" in text and '"profile"' in text
    assert summary["memory_per_key"]["ana"]["escalated"] == ["shipping"]
    assert sum(summary["runs_per_key"].values()) == 40
    outputs = read_json_files(outputs_dir)
    errors = read_json_files(errors_dir)
    assert len(outputs) == summary["outputs"] == 40
    assert sum("escalation" in o for o in outputs) == 4
    assert [e["kind"] for e in errors] == ["rejected", "rejected"]


def read_json_files(path: Path) -> list:
    files = [path] if path.is_file() else sorted(path.rglob("*.jsonl"))
    return [json.loads(x) for f in files for x in f.read_text().splitlines() if x]


def test_demo_on_the_local_runner_prints_a_summary(tmp_path):
    console = Console(record=True, width=200)
    summary = run_demo(
        REPO / "plans/support_triage.yaml",
        REPO / "data/support_tickets.jsonl",
        tmp_path,
        console,
        local=True,
    )
    text = console.export_text()
    assert "on the local runner" in text
    _check_demo(summary, text, tmp_path / "outputs.jsonl", tmp_path / "errors.jsonl")


@pytest.mark.flink
def test_demo_runs_the_main_job_in_minicluster_like_the_local_runner(tmp_path):
    console = Console(record=True, width=200)
    summary = run_demo(
        REPO / "plans/support_triage.yaml",
        REPO / "data/support_tickets.jsonl",
        tmp_path / "flink",
        console,
    )
    text = console.export_text()
    assert "on the Flink MiniCluster" in text
    _check_demo(summary, text, tmp_path / "flink/outputs", tmp_path / "flink/errors")
    local = run_demo(
        REPO / "plans/support_triage.yaml",
        REPO / "data/support_tickets.jsonl",
        tmp_path / "local",
        Console(record=True, width=200),
        local=True,
    )
    assert summary["memory_per_key"] == local["memory_per_key"]
    assert summary["runs_per_key"] == local["runs_per_key"]
    assert summary["outputs_per_key"] == local["outputs_per_key"]


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
        [
            "run",
            str(REPO / "plans/support_triage.yaml"),
            str(data),
            "--key",
            "user",
            "--output",
            str(out),
            "--errors",
            str(err),
        ]
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
        [sys.executable, "-m", "flink_agents", "demo", "--local", "--out", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "records in 42" in result.stdout
    assert (tmp_path / "outputs.jsonl").exists()
