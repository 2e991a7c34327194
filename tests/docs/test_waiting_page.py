"""docs/waiting.md's example runs as written and prints what the page shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from flink_agents.testing import clean_environment

PAGE = Path(__file__).resolve().parents[2] / "docs/waiting.md"


def test_the_example_prints_the_lines_the_page_shows(tmp_path):
    code = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)[0]
    expected = re.findall(r"^# ((?:ada|bob): .*)$", code, re.M)
    assert len(expected) == 6
    script = tmp_path / "follow_ups.py"
    script.write_text(code)
    env = {**clean_environment(), "FLINK_AGENTS_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == expected
