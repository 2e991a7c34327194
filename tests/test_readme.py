"""The README's example runs as shown and prints what it says it prints."""

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_readme_agent_example_prints_its_documented_output(tmp_path):
    readme = (REPO / "README.md").read_text()
    (code,) = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "NoteTaker" in b]
    expected = re.search(r"^# (\[.*\])$", code, re.M).group(1)
    script = tmp_path / "example.py"
    script.write_text(code)
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == expected
