"""The README's tool-using agent runs as shown, against the scripted OpenAI-compatible server.

The snippet is the README's one python block that builds a ReActAgent on an OpenAIChatModel.
"""

import re
import subprocess
import sys
from pathlib import Path

from flink_agents.testing import clean_environment
from flink_agents.testing.llm_server import Rule, ToolCallSpec

REPO = Path(__file__).resolve().parents[2]
SOURCES = [REPO / "README.md"]
SECRET = "sk-readme-example-2718"


def tools_example() -> str:
    """The one python block that builds a ReActAgent on an OpenAIChatModel."""
    for source in SOURCES:
        if not source.exists():
            continue
        blocks = re.findall(r"```python\n(.*?)```", source.read_text(), re.S)
        found = [b for b in blocks if "ReActAgent(" in b and "OpenAIChatModel(" in b]
        if found:
            (code,) = found
            return code
    raise AssertionError(f"no tool-using agent example in {[str(s) for s in SOURCES]}")


def test_readme_tools_example_calls_its_tool_through_the_endpoint(tmp_path, llm_server):
    llm_server.add_rule(
        Rule(after_tool="order_status", reply_text="Your order A-1001 is {tool_result}.")
    )
    llm_server.add_rule(
        Rule(
            last_user_contains="A-1001",
            reply_tool_calls=[ToolCallSpec("order_status", {"order_id": "A-1001"})],
        )
    )
    script = tmp_path / "order_agent.py"
    script.write_text(tools_example())
    env = {
        **clean_environment(),
        "OPENAI_BASE_URL": llm_server.base_url,
        "OPENAI_API_KEY": SECRET,
        "FLINK_AGENTS_DATA_DIR": str(tmp_path / "data"),
    }
    env.pop("OPENAI_MODEL", None)
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # The answer holds what the tool returned: the model really called it.
    assert result.stdout.strip() == "Your order A-1001 is shipped on Monday, arriving Thursday."
    first, second = (call.request for call in llm_server.calls)
    assert first["model"] == "gpt-4o-mini"
    [spec] = first["tools"]
    assert spec["function"]["name"] == "order_status"
    assert spec["function"]["description"] == "Look up where an order is."
    order_id = spec["function"]["parameters"]["properties"]["order_id"]
    assert order_id == {"type": "string", "description": 'the order number, such as "A-1001".'}
    assert second["messages"][-1]["role"] == "tool"
    assert SECRET not in result.stdout + result.stderr
