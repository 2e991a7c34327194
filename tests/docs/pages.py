"""Running a documentation page's example as a user would: its first ``python`` block saved
as a script and run by this interpreter in a clean environment."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from flink_agents.testing import clean_environment

DOCS = Path(__file__).resolve().parents[2] / "docs"


def run_first_example(
    page: str, work: Path, script: str, index: int = 0, in_work: bool = False
) -> tuple[list[str], list[str]]:
    """Run the first ``python`` block of ``docs/<page>`` (or the one at ``index``) as
    ``work/<script>`` (in the folder ``work`` with ``in_work``, for an example that writes
    files where it runs); the lines it printed, and the lines its comments say it prints
    (``# `` followed by a line that starts with a key of the example's: ``name: ...``)."""
    code = re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), re.S)[index]
    shown = re.findall(r"^# (\w+: .*)$", code, re.M)
    path = work / script
    path.write_text(code)
    env = {**clean_environment(), "FLINK_AGENTS_DATA_DIR": str(work / "data")}
    done = subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=work if in_work else None,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines(), shown
