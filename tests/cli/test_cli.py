"""The flink-agents command: demo, run with an error output, validate, compile."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from flink_agents.cli import main
from flink_agents.cli._demo import choose_model, run_demo, with_model
from flink_agents.plan import compile_agent, load_plan, save_plan
from flink_agents.testing import clean_environment, free_port
from flink_agents.testing.llm_server import Rule
from tests.recovery.log_failure_agents import LoggedAgent

REPO = Path(__file__).resolve().parents[2]


TRIAGE_PLAN = REPO / "plans/support_triage.yaml"
REPLIES_PLAN = REPO / "plans/support_replies.yaml"
DATA = REPO / "data/support_tickets.jsonl"
REPLIES = 36  # one per routed ticket: 40 outputs less the 4 escalations


@pytest.fixture
def no_model_configured(monkeypatch):
    """The demo must not reach a real model from the test machine's environment."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)


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
    places = sorted((Path(e["file"]).name, e["line"], e["reason"].split(" (")[0]) for e in errors)
    assert places == [
        ("support_tickets.jsonl", 12, "invalid JSON"),
        ("support_tickets.jsonl", 24, "record has no key field 'user'"),
    ]
    return outputs


def _check_stand_in_replies(summary, text, outputs):
    """Every routed ticket got the stand-in's reply for its category, and it says so."""
    assert "No OPENAI_API_KEY is set: a scripted TEST STAND-IN" in text
    assert "NOT a real model" in text
    assert f"Replies drafted by the scripted TEST STAND-IN (not a real model): {REPLIES} calls" in (
        " ".join(text.split())
    )
    model = summary["model"]
    assert model["stand_in"] and model["calls"] == REPLIES  # the server counted the calls
    assert model["tokens"] > 0
    replies = {o["ticket"]: o for o in outputs if "reply" in o}
    assert len(replies) == REPLIES == len(summary["replies"])
    assert replies["T-1001"]["reply"].startswith("[stand-in] Thanks for the report: our SRE")
    assert replies["T-1002"]["reply"].startswith("[stand-in] Sorry about the charge")
    assert all(o["reply"].startswith("[stand-in] ") for o in replies.values())
    assert all(o["reply_tokens"] > 0 for o in replies.values())
    # The agent's own metrics agree (on Flink, from the final records of the event log).
    metrics = summary["metrics"]
    assert sum(v for k, v in metrics.items() if k.endswith(".numOfRequests")) == REPLIES
    assert sum(v for k, v in metrics.items() if k.endswith(".promptTokens")) > 0
    assert metrics["numOfDurableCalls"] == REPLIES
    assert f"LLM calls {REPLIES} (tokens: " in text
    # The spend by model, the stand-in priced like a small hosted model.
    [model_name] = [k.split(".")[1] for k in metrics if k.endswith(".numOfRequests")]
    tokens = metrics[f"model.{model_name}.promptTokens"]
    tokens += metrics[f"model.{model_name}.completionTokens"]
    cost = (
        metrics[f"model.{model_name}.promptTokens"] * 0.15
        + metrics[f"model.{model_name}.completionTokens"] * 0.6
    )
    assert metrics[f"model.{model_name}.costMicros"] == pytest.approx(cost, abs=REPLIES)
    assert (
        f"spend by model: {model_name}: {REPLIES} calls, {int(tokens)} tokens, cost "
        f"{metrics[f'model.{model_name}.costMicros'] / 1e6:.6f}"
    ) in text
    assert "one key's history: flink-agents history --job demo-" in text


def read_json_files(path: Path) -> list:
    files = [path] if path.is_file() else sorted(path.rglob("*.jsonl"))
    return [json.loads(x) for f in files for x in f.read_text().splitlines() if x]


def test_demo_on_the_local_runner_drafts_replies_with_the_stand_in(tmp_path, no_model_configured):
    console = Console(record=True, width=200)
    summary = run_demo(REPLIES_PLAN, DATA, tmp_path, console, local=True)
    text = console.export_text()
    assert "on the local runner" in text
    outputs = _check_demo(summary, text, tmp_path / "outputs.jsonl", tmp_path / "errors.jsonl")
    _check_stand_in_replies(summary, text, outputs)
    assert "FLINK_AGENTS_STAND_IN_KEY" not in os.environ  # the demo's variable is removed


def test_demo_without_a_model_in_the_plan_starts_no_stand_in(tmp_path, no_model_configured):
    console = Console(record=True, width=200)
    summary = run_demo(TRIAGE_PLAN, DATA, tmp_path, console, local=True)
    text = console.export_text()
    _check_demo(summary, text, tmp_path / "outputs.jsonl", tmp_path / "errors.jsonl")
    assert summary["model"] is None and summary["replies"] == []
    assert "STAND-IN" not in text and "Replies drafted" not in text


def test_demo_uses_the_model_configured_in_the_environment(tmp_path, monkeypatch, llm_server):
    """OPENAI_* point the demo at an OpenAI-compatible endpoint (here a scripted one that
    the demo did not start); the key reaches the model and nothing else."""
    secret = "sk-demo-secret-31337"
    llm_server.add_rule(Rule(reply_text="We are on it: {last_user}"))
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("OPENAI_MODEL", "my-model")
    console = Console(record=True, width=200)
    summary = run_demo(REPLIES_PLAN, DATA, tmp_path, console, local=True)
    text = console.export_text()
    outputs = _check_demo(summary, text, tmp_path / "outputs.jsonl", tmp_path / "errors.jsonl")
    host = llm_server.base_url.split("//")[1].split("/")[0]
    assert f"model: my-model at {host} drafts the replies" in text
    assert "STAND-IN" not in text and f"Replies drafted by my-model at {host}" in text
    assert summary["model"] == {
        "name": "my-model",
        "host": host,
        "stand_in": False,
        "calls": None,
        "tokens": sum(o["reply_tokens"] for o in outputs if "reply" in o),
    }
    assert llm_server.call_count("chat") == 1 + REPLIES  # a check before the job, then replies
    assert llm_server.calls[0].request["messages"][0]["content"] == "Reply with the word OK."
    assert {c.request["model"] for c in llm_server.calls} == {"my-model"}
    [first] = [o for o in outputs if o.get("ticket") == "T-1001" and "reply" in o]
    assert first["reply"] == (
        "We are on it: Ticket T-1001 (outage, priority normal, handled by the sre team): "
        "The dashboard is down with error 500"
    )
    written = "".join(p.read_text() for p in tmp_path.rglob("*.jsonl"))
    assert secret not in text and secret not in written


def test_demo_stops_at_once_when_the_configured_model_does_not_answer(
    tmp_path, monkeypatch, llm_server, capsys
):
    secret = "sk-wrong-key-8080"
    llm_server.fail_next(5, status=401)
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.base_url)
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    arguments = ["--plan", str(REPLIES_PLAN), "--data", str(DATA), "--out", str(tmp_path)]
    assert main(["demo", "--local", *arguments]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: the demo's model does not answer (chat model 'gpt-4o-mini'")
    assert "last status: 401" in err and "check OPENAI_API_KEY" in err
    assert secret not in err
    assert llm_server.call_count("chat") == 1  # a 401 is not retried; no run was started
    assert not (tmp_path / "outputs.jsonl").exists()


def test_the_demo_plan_names_the_key_only_by_reference(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-in-a-plan-5150")
    model = choose_model()
    assert (model.name, model.host, model.stand_in) == ("gpt-4o-mini", "api.openai.com", False)
    plan = with_model(load_plan(REPLIES_PLAN), model)
    [chat] = [r for r in plan.resources if r.name == "reply_model"]
    assert chat.args["api_key"] == {"env": "OPENAI_API_KEY"}
    assert chat.args["model"] == "gpt-4o-mini"
    assert "sk-never-in-a-plan" not in plan.to_json() + plan.to_yaml()


@pytest.mark.flink
def test_demo_runs_the_main_job_in_minicluster_like_the_local_runner(tmp_path, no_model_configured):
    console = Console(record=True, width=200)
    summary = run_demo(REPLIES_PLAN, DATA, tmp_path / "flink", console)
    text = console.export_text()
    assert "on the Flink MiniCluster" in text
    outputs = _check_demo(summary, text, tmp_path / "flink/outputs", tmp_path / "flink/errors")
    # The Python worker called the stand-in this process started, once per routed ticket.
    _check_stand_in_replies(summary, text, outputs)
    # Drafting replies changes nothing else: the model-free plan on the local runner agrees.
    local = run_demo(
        TRIAGE_PLAN, DATA, tmp_path / "local", Console(record=True, width=200), local=True
    )
    assert summary["memory_per_key"] == local["memory_per_key"]
    assert summary["runs_per_key"] == local["runs_per_key"]
    assert summary["outputs_per_key"] == local["outputs_per_key"]
    triage = read_json_files(tmp_path / "local/outputs.jsonl")
    without_replies = [{k: v for k, v in o.items() if not k.startswith("reply")} for o in outputs]
    assert sorted(map(json.dumps, without_replies)) == sorted(map(json.dumps, triage))


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


def test_run_keeps_every_good_line_around_one_that_is_not_utf8(tmp_path):
    """A line in another encoding costs that line (with its file and number), not the run."""
    data = tmp_path / "in.jsonl"
    data.write_bytes(
        b'{"id": "T-1", "user": "a", "text": "refund please"}\n'
        b'{"id": "T-2", "user": "a", "text": "caf\xe9 order"}\n'
        b'{"id": "T-3", "text": "who am I?"}\n'
        b'{"id": "T-4", "user": "b", "text": "invoice is wrong"}\n'
    )
    out, err = tmp_path / "out.jsonl", tmp_path / "err.jsonl"
    args = ["run", str(TRIAGE_PLAN), str(data), "--key", "user"]
    assert main([*args, "--output", str(out), "--errors", str(err)]) == 0
    assert [json.loads(x)["ticket"] for x in out.read_text().splitlines()] == ["T-1", "T-4"]
    first, second = (json.loads(x) for x in err.read_text().splitlines())
    assert first == {
        "kind": "rejected",
        "reason": "not UTF-8 (byte 0xe9 at column 40)",
        "file": str(data),
        "line": 2,
        "raw": '{"id": "T-2", "user": "a", "text": "caf\\xe9 order"}',
    }
    assert (second["kind"], second["line"], second["file"]) == ("rejected", 3, str(data))
    assert second["reason"] == "record has no key field 'user'"


def test_run_with_a_missing_input_says_so_in_one_line(tmp_path):
    missing = tmp_path / "nowhere.jsonl"
    command = Path(sys.executable).with_name("flink-agents")
    result = subprocess.run(
        [command, "run", TRIAGE_PLAN, missing, "--key", "user", "--output", tmp_path / "out.jsonl"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr == f"error: cannot read {missing}: No such file or directory\n"
    assert not (tmp_path / "out.jsonl").exists()


def run_with_action_log(tmp_path: Path, action_log: str, plan: Path, data: Path):
    """``flink-agents run`` in a child process whose ``config.yaml`` sets ``action-log``."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "config.yaml").write_text(f"agent:\n  action-log: {action_log}\n")
    out, err = tmp_path / "out.jsonl", tmp_path / "err.jsonl"
    command = [sys.executable, "-m", "flink_agents", "run", plan, data, "--key", "user"]
    return subprocess.run(
        [*command, "--output", out, "--errors", err],
        env={**clean_environment(), "FLINK_CONF_DIR": str(conf)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_run_with_an_unreachable_action_log_says_so_in_one_line(tmp_path):
    """A PostgreSQL log on a port nothing listens on: one line naming the log, its password
    redacted, and a non-zero exit; no traceback."""
    url = f"postgresql://agents:s3cret-pw@127.0.0.1:{free_port()}/agents"
    result = run_with_action_log(tmp_path, url, TRIAGE_PLAN, DATA)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    shown = url.replace("s3cret-pw", "***")
    assert line.startswith(f"error: action log {shown}: opening failed: OperationalError: ")
    assert "s3cret-pw" not in result.stderr + result.stdout


def test_run_whose_action_log_vanishes_mid_run_fails_naming_it(tmp_path):
    """The SQLite log's file is deleted at the fifth record (by the agent's durable call):
    the next write fails, the command stops with one line naming the log, and no run is
    reported as failed for it (the log is not the action's fault)."""
    log_file = tmp_path / "log" / "actions.db"
    plan = compile_agent(LoggedAgent).model_copy(
        update={"config": {"log_file": str(log_file), "delete_at": 5}}
    )
    plan_file = save_plan(plan, tmp_path / "logged.yaml")
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"user": f"u{n % 3}", "n": n}) + "\n" for n in range(12)))
    result = run_with_action_log(tmp_path, f"sqlite://{log_file}", plan_file, data)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: action log sqlite://{log_file}: ") and "deleted" in line
    assert (tmp_path / "err.jsonl").read_text() == ""
    outputs = [json.loads(x)["n"] for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert outputs == list(range(5))  # what ran before the log was lost


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
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    result = subprocess.run(
        [sys.executable, "-m", "flink_agents", "demo", "--local", "--out", str(tmp_path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "records in 42" in result.stdout
    assert "TEST STAND-IN" in result.stdout and "[stand-in]" in result.stdout
    assert (tmp_path / "outputs.jsonl").exists()


def test_run_fires_the_pending_scheduled_events_at_the_end_of_its_input(tmp_path):
    """``flink-agents run`` ends its input as every runner does: the keys' pending
    scheduled events fire then, their outputs after the last line's."""
    plan = tmp_path / "plan.json"
    main(["compile", "tests.runtime.scheduling_agents:FollowsUp", "-o", str(plan)])
    data = tmp_path / "in.jsonl"
    data.write_text('{"k": "a", "n": 1, "days": 2}\n{"k": "b", "n": 2, "days": 1}\n')
    out, err = tmp_path / "out.jsonl", tmp_path / "err.jsonl"
    args = ["run", str(plan), str(data), "--key", "k", "--output", str(out), "--errors", str(err)]
    assert main(args) == 0
    outputs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [o.get("followed", o.get("n")) for o in outputs] == [1, 2, "follow-up 1", "follow-up 2"]
    assert err.read_text() == ""
