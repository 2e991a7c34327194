"""The README's example runs as shown and prints what it says it prints."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from flink_agents.testing import clean_environment

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


@pytest.mark.flink
def test_readme_datastream_example_runs_in_minicluster(tmp_path):
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    (code,) = [b for b in blocks if "plans/support_triage.yaml" in b]
    script = tmp_path / "wrap.py"
    script.write_text(code)
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=REPO,
        env={"PATH": clean_environment()["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for line in ("ana -> finance", "bo -> sre"):
        assert line in result.stdout


def test_readme_long_term_memory_example_recalls_by_meaning(tmp_path):
    """The preferences example: two runs on one store; the second recalls by meaning, and
    only for the user who said it (the printed list is the one the README shows)."""
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    (code,) = [b for b in blocks if "long_term_memory.create_memory_set" in b]
    expected = re.search(r"^# (\[.*\])", code, re.M).group(1)
    store = tmp_path / "prefs"
    script = tmp_path / "prefs.py"
    script.write_text(code.replace('"/tmp/prefs-demo"', repr(str(store))))
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == expected
    assert store.is_dir()


@pytest.mark.flink
def test_readme_one_file_job_runs_with_the_venv_interpreter_unactivated(tmp_path):
    """``.venv/bin/python my_job.py`` from another directory, the venv not on ``PATH``: the
    agent is defined in the script, and the job runs in the default (thread) mode."""
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    (code,) = [b for b in blocks if b.startswith("# my_job.py")]
    script = tmp_path / "my_job.py"
    script.write_text(code)
    venv_bin = str(Path(sys.executable).parent)
    path = [p for p in clean_environment()["PATH"].split(":") if p != venv_bin]
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={"PATH": ":".join(path), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # print() prefixes each line with its subtask ("2> HELLO!") when the job runs in parallel.
    shouted = re.findall(r"^(?:\d+> )?(HELLO!|FLINK!)$", result.stdout, re.M)
    assert sorted(shouted) == ["FLINK!", "HELLO!"]
