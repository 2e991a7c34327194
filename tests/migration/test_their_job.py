"""A one-file job written for Apache Flink Agents, run as its users run it
(``python their_job.py``) on MiniCluster in both execution modes, against the scripted
stand-in: the same outputs as on the local runner."""

import json
from pathlib import Path

import pytest

from flink_agents.testing.llm_server import Rule, ScriptedLLMServer
from tests.runtime.flink.test_script_jobs import run_script

SCRIPT = Path(__file__).parent / "scripts" / "their_job.py"

EXPECTED = [
    {"flagged": False, "review": "great sound"},
    {"flagged": False, "review": "works fine"},
    {"flagged": True, "review": "box arrived crushed"},
]


def script(server: ScriptedLLMServer) -> None:
    server.add_rule(Rule(last_user_contains="crushed", reply_text='{"score": 1}'))
    server.add_rule(Rule(reply_text='{"score": 5}'))


@pytest.mark.flink
@pytest.mark.parametrize("mode", ["default", "process"])
def test_their_one_file_job_runs_on_minicluster(tmp_path, mode, monkeypatch):
    out = tmp_path / "outputs.jsonl"
    with ScriptedLLMServer() as server:
        script(server)
        monkeypatch.setenv("MIGRATION_STAND_IN_URL", server.base_url.removesuffix("/v1"))
        result = run_script(SCRIPT, str(out), mode, cwd=tmp_path, activated=mode == "process")
        assert result.returncode == 0, result.stderr[-4000:]
        requests = [call.request for call in server.calls]
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(got, key=lambda o: o["review"]) == sorted(EXPECTED, key=lambda o: o["review"])
    assert len(requests) == 3
    assert all(r["model"] == "qwen3:8b" for r in requests)
    assert all([t["function"]["name"] for t in r["tools"]] == ["flag_shipping"] for r in requests)
