"""docs/mcp.md's example runs as written, in a child process: the calendar server block and
the agent block, against the scripted model, which books only through the server's tools;
the page's plan binds."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from flink_agents.plan import bind_plan, plan_from_yaml
from flink_agents.testing import clean_environment
from flink_agents.testing.llm_server import Rule, ToolCallSpec

REPO = Path(__file__).resolve().parents[3]
PAGE = REPO / "docs/mcp.md"
SECRET = "sk-mcp-docs-1357"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(), re.S)


def test_the_docs_example_prints_what_the_page_shows(tmp_path, llm_server):
    server, agent = blocks("python")
    assert server.startswith("# calendar_server.py") and agent.startswith("# meeting_agent.py")
    (tmp_path / "calendar_server.py").write_text(server)
    (tmp_path / "meeting_agent.py").write_text(agent)
    [expected] = re.findall(r"^# (Booked .*)$", agent, re.M)
    llm_server.add_rule(Rule(after_tool="book", reply_text="{tool_result}"))
    booking = {"title": "Design review", "day": "Tuesday", "time": "09:00"}
    llm_server.add_rule(
        Rule(after_tool="free_slots", reply_tool_calls=[ToolCallSpec("book", booking)])
    )
    llm_server.add_rule(
        Rule(
            last_user_contains="The user asks: Book a design review",
            reply_tool_calls=[ToolCallSpec("free_slots", {"day": "Tuesday"})],
        )
    )
    env = {
        **clean_environment(),
        "OPENAI_BASE_URL": llm_server.base_url,
        "OPENAI_API_KEY": SECRET,
        "FLINK_AGENTS_DATA_DIR": str(tmp_path / "data"),
    }
    env.pop("OPENAI_MODEL", None)
    result = subprocess.run(
        [sys.executable, "meeting_agent.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == [expected]
    first, second, third = (call.request for call in llm_server.calls)
    assert [t["function"]["name"] for t in first["tools"]] == ["free_slots", "book"]
    assert first["messages"][0]["content"].startswith("You schedule meetings")
    assert second["messages"][-1]["content"] == "09:00\n14:30"
    assert third["messages"][-1]["content"] == expected
    assert SECRET not in result.stdout + result.stderr


def test_the_docs_plan_binds():
    [plan_text] = blocks("yaml")
    plan = bind_plan(plan_from_yaml(plan_text)).plan
    servers = [r for r in plan.resources if r.type.value == "mcp_server"]
    assert [s.name for s in servers] == ["calendar", "crm"]
    assert servers[1].args["headers"] == {"Authorization": {"env": "CRM_AUTH"}}
    assert plan.config["react"]["tools"] == ["calendar", "crm"]
