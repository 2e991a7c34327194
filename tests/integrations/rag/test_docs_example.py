"""docs/rag.md's example runs as written, in a child process, against the scripted server:
it answers only when the right document reached its prompt, so the printed lines are the
page's only if retrieval found them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from flink_agents.testing import clean_environment
from flink_agents.testing.llm_server import Rule

REPO = Path(__file__).resolve().parents[3]
PAGE = REPO / "docs/rag.md"
SECRET = "sk-rag-docs-8642"


def example() -> tuple[str, list[str]]:
    """The page's one python block, and the output it documents (its last comment lines)."""
    [code] = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    expected = re.findall(r"^# (\[.*)$", code, re.M)
    return code, expected


def test_the_docs_example_prints_what_the_page_shows(tmp_path, llm_server):
    code, expected = example()
    assert len(expected) == 2
    for line in expected:  # "['leave'] You have 25 days ...": the answer, given its document
        sources, answer = line.split("] ", 1)
        document = {"['leave'": "25 days of paid leave", "['laptop'": "broken laptop"}[sources]
        llm_server.add_rule(Rule(system_contains=document, reply_text=answer))
    llm_server.add_rule(Rule(reply_text="I do not know."))
    script = tmp_path / "handbook.py"
    script.write_text(code)
    env = {
        **clean_environment(),
        "OPENAI_BASE_URL": llm_server.base_url,
        "OPENAI_API_KEY": SECRET,
        "FLINK_AGENTS_DATA_DIR": str(tmp_path / "data"),
    }
    env.pop("OPENAI_MODEL", None)
    for _ in range(2):  # the second run loads nothing new and answers the same
        result = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.splitlines() == expected
    first = llm_server.calls[0].request
    assert first["model"] == "gpt-4o-mini"
    assert "25 days of paid leave" in first["messages"][0]["content"]
    assert "broken laptop" not in first["messages"][0]["content"]  # max_results=1
    assert SECRET not in result.stdout + result.stderr
    assert (tmp_path / "data" / "vector-store" / "flink_agents_knowledge").is_dir()
