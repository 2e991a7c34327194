"""Apache Flink Agents' quickstart (the workflow of two agents and the ReAct agent), in
their style, run as a one-file job on MiniCluster against the scripted stand-in."""

import json
from pathlib import Path

import pytest

from flink_agents.testing.llm_server import Rule, ScriptedLLMServer, ToolCallSpec
from tests.runtime.flink.test_script_jobs import run_script

SCRIPT = Path(__file__).parent / "scripts" / "their_quickstart.py"
REVIEWS = [
    {"id": "p1", "review": "the box arrived crushed"},
    {"id": "p1", "review": "sounds lovely"},
    {"id": "p2", "review": "battery died in a day"},
    {"id": "p2", "review": "great value"},
]


def script(server: ScriptedLLMServer) -> None:
    """Analysis: shipping complaints go through the tool; suggestions; the ReAct answers."""
    server.add_rule(
        Rule(last_user_contains="Suggest", reply_text='{"suggestion_list": ["pack better"]}')
    )
    server.add_rule(
        Rule(
            system_contains="Score the review.",
            after_tool="notify_shipping_manager",
            reply_json={"id": "p1", "score": 1, "reasons": ["shipping"]},
        )
    )
    server.add_rule(
        Rule(
            system_contains="Score the review.",
            last_user_contains="crushed",
            reply_tool_calls=[
                ToolCallSpec("notify_shipping_manager", {"id": "p1", "review": "crushed"})
            ],
        )
    )
    server.add_rule(
        Rule(
            system_contains="Score the review.",
            last_user_matches=r'"id": (p\d)',
            reply_json={"id": "p2", "score": 4, "reasons": []},
        )
    )
    server.add_rule(
        Rule(
            after_tool="notify_shipping_manager",
            reply_text='{"score": 1, "reasons": ["shipping damage"]}',
        )
    )
    server.add_rule(
        Rule(
            last_user_contains="crushed",
            reply_tool_calls=[
                ToolCallSpec("notify_shipping_manager", {"id": "p1", "review": "crushed"})
            ],
        )
    )
    server.add_rule(
        Rule(last_user_contains="battery", reply_text='{"score": 2, "reasons": ["battery"]}')
    )
    server.add_rule(Rule(reply_text='<think>ok</think>{"score": 5, "reasons": []}'))


@pytest.mark.flink
def test_their_quickstart_runs_on_minicluster(tmp_path, monkeypatch):
    reviews = tmp_path / "reviews.json"
    reviews.write_text("".join(json.dumps(r) + "\n" for r in REVIEWS))
    out = tmp_path / "outputs.jsonl"
    with ScriptedLLMServer() as server:
        script(server)
        monkeypatch.setenv("MIGRATION_STAND_IN_URL", server.base_url.removesuffix("/v1"))
        result = run_script(SCRIPT, str(reviews), str(out), cwd=tmp_path, activated=False)
        assert result.returncode == 0, result.stderr[-4000:]
    got = [json.loads(line) for line in out.read_text().splitlines()]
    suggestions = sorted(
        (o["output"] for o in got if o["tag"] == "suggestion"), key=lambda o: o["id"]
    )
    assert suggestions == [
        {"id": "p1", "suggestions": ["pack better"]},
        {"id": "p2", "suggestions": ["pack better"]},
    ]
    react = sorted((o["output"] for o in got if o["tag"] == "react"), key=lambda o: o["score"])
    assert [o["score"] for o in react] == [1, 4, 4, 4]
