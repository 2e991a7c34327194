"""Take this release's compatibility fixture: run by hand, never by CI or the test suite.

    .venv/bin/python -m tests.compat.take_fixture

from the repository's root, on a clean checkout of the main commit being released (the
script refuses a work tree whose ``flink_agents/`` or ``pyproject.toml`` differ from
``HEAD``). It writes ``tests/compat/<version>-<date>/`` (the package's version from
``pyproject.toml``, today's date in UTC) and refuses to write over a directory that exists:
**a fixture is never regenerated**. A fixture that no longer restores is a break of the
compatibility promise (``tests/compat/README.md``), to be fixed in the code, not in the
fixture. Commit the new directory as it is.

What it does: a MiniCluster job of ``CompatAgent`` (``compat_job.py``, PyFlink's thread
mode, in a child process) reads ``BATCH_1`` and waits until every run of it has ended and
its outputs are committed. Then it reads ``BATCH_2``, whose runs park on calls to the
``held_llm`` model, which never answers before the stop: a run parked in the built-in chat
action, one parked on its second call after a first that the log holds, and a fan-out group
with one member done and two members in flight (one of them after a recorded call), each
with inputs queued behind it for the same key; one more key runs to its end. Once the held
server has received exactly the held calls and the action log holds exactly
``LOG_AT_STOP``, the job is stopped with a savepoint, and the action log is copied after the
job has ended, while the held calls are still unanswered (in thread mode they would
otherwise still complete after the stop and be recorded, issue 40 item 6): the copy holds
what ``LOG_AT_STOP`` says and nothing else.

What the restore must produce comes from the local runner, in this process, fed every
record (both batches, then ``PROBES``) with every call answered: a run without a stop. The
outputs committed before the stop must be that run's outputs of the records that ended
before it, and the requests answered before the stop its requests for them; the restore
must produce the rest, make exactly the rest of the requests, and leave the memory the
probes show. All of it goes into ``manifest.json`` beside the savepoint and the log.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
JOB = "compat-fixture"
"""The pinned ``action-log-job``: the restore must replay under the name the log holds."""
CHILD_TIMEOUT_S = 600

_PANEL_IN_FLIGHT = {"first": ["llm"], "second": ["held_llm"], "third": ["llm", "held_llm"]}

BATCH_1 = [
    {"id": "a1", "key": "ana", "kind": "ask", "model": "llm", "text": "Which river?"},
    {"id": "b1", "key": "bo", "kind": "twice", "models": ["llm", "llm"], "text": "Which fjord?"},
    {
        "id": "c1",
        "key": "cy",
        "kind": "panel",
        "plan": {"first": ["llm"], "second": ["llm"], "third": ["llm"]},
        "text": "Tea or coffee?",
    },
]
"""Runs that end before the second batch: short-term memory that later runs build on."""

BATCH_2 = [
    # Parked in the built-in chat action, on a call in flight.
    {"id": "a2", "key": "ana", "kind": "ask", "model": "held_llm", "text": "Which tower?"},
    # Parked on its second call; the first is in the log.
    {"id": "b2", "key": "bo", "kind": "twice", "models": ["llm", "held_llm"], "text": "How deep?"},
    # A fan-out group in flight: first done, second in flight, third in flight after a call.
    {"id": "c2", "key": "cy", "kind": "panel", "plan": _PANEL_IN_FLIGHT, "text": "Milk?"},
    # Queued behind the parked runs of their keys.
    {"id": "a3", "key": "ana", "kind": "twice", "models": ["llm", "llm"], "text": "How tall?"},
    {"id": "a4", "key": "ana", "kind": "ask", "model": "llm", "text": "Which bridge?"},
    {"id": "b3", "key": "bo", "kind": "ask", "model": "llm", "text": "Which boat?"},
    {"id": "c3", "key": "cy", "kind": "ask", "model": "llm", "text": "Sugar?"},
    # Last in the file: once its output is committed, every record above reached the agent.
    {"id": "d1", "key": "dee", "kind": "ask", "model": "llm", "text": "Which day?"},
]
ENDED_BEFORE_STOP = ["a1", "b1", "c1", "d1"]
HELD = ["a2: Which tower?", "b2 call 1: How deep?", "c2 second call 0: Milk?"]
HELD += ["c2 third call 1: Milk?"]

PROBES = [{"id": f"probe-{key}", "key": key, "kind": "probe"} for key in ("ana", "bo", "cy", "dee")]
"""Read after the restore, once every restored run has ended: each key's memory."""

LOG_AT_STOP: dict[str, list[list[Any]]] = {
    "ana": [[1, 2, "chat_model_action", True, 1]],
    "bo": [[1, 2, "twice", True, 2], [2, 2, "twice", False, 1]],
    "cy": [
        [1, 2, "first", True, 1],
        [1, 3, "second", True, 1],
        [1, 4, "third", True, 1],
        [2, 2, "first", True, 1],
        [2, 4, "third", False, 1],
    ],
    "dee": [[1, 2, "chat_model_action", True, 1]],
}
"""What the action log holds at the stop, per key: ``[run, step, action, completed, calls]``
(``compat_job.log_summary``). The runs of the first batch and ``d1`` completed; of the runs in
flight, ``b2``'s first call, the group's finished member ``first`` and ``third``'s first
call; nothing of the held calls. These are the step numbers and action names of release
0.1.0: a later release whose log says otherwise gets the child's failure naming what it
holds; update this after checking that the difference is meant, never an earlier fixture."""


def check_clean_package() -> str:
    """The commit the package's code is at; fails if the work tree changed it."""
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--", "flink_agents", "pyproject.toml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if changed.strip():
        sys.exit(f"the package differs from HEAD; take a fixture from a clean checkout:\n{changed}")
    return git("rev-parse", "HEAD")


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()


def run_without_stop() -> tuple[list[dict[str, Any]], list[str]]:
    """Every record on the local runner, every call answered: the outputs and the prompts."""
    from flink_agents.runtime import AgentOptions, LocalRunner
    from flink_agents.testing.llm_server import Rule, ScriptedLLMServer
    from tests.compat.compat_agents import CompatAgent
    from tests.compat.compat_job import REPLY, last_user

    with ScriptedLLMServer([Rule(reply_text=REPLY)]) as server, tempfile.TemporaryDirectory() as d:
        os.environ["COMPAT_LLM_URL"] = os.environ["COMPAT_HELD_LLM_URL"] = server.base_url
        runner = LocalRunner(CompatAgent, options=AgentOptions(data_dir=d, action_log="none"))
        outputs = []
        try:
            for record in [*BATCH_1, *BATCH_2, *PROBES]:
                outputs += runner.feed(record["key"], record)
            outputs += runner.finish()
        finally:
            runner.engine.close()
        return outputs, [last_user(call.request) for call in server.calls]


def take(work: Path) -> dict[str, Any]:
    """Run the job that takes the savepoint (``compat_job.py``, mode ``take``)."""
    spec = {
        "mode": "take",
        "job": JOB,
        "action_log": f"sqlite://{work / 'action-log.db'}",
        "savepoint": None,
        "work": str(work),
        "batches": [
            {"file": "batch-1.jsonl", "records": BATCH_1, "wait_ids": [r["id"] for r in BATCH_1]},
            {"file": "batch-2.jsonl", "records": BATCH_2, "wait_ids": ["d1"]},
        ],
        "held": HELD,
        "log_before_stop": LOG_AT_STOP,
        "log_copy": str(work / "action-log-copy.db"),
    }
    spec_file = work / "spec.json"
    spec_file.write_text(json.dumps(spec))
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("FLINK_", "PYFLINK_", "_PYFLINK"))
    }
    environment["LOG4J_PROPERTIES"] = str(REPO / "conf" / "log4j.properties")
    done = subprocess.run(
        [sys.executable, "-m", "tests.compat.compat_job", str(spec_file)],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not results:
        sys.exit(f"the job failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr}")
    return json.loads(results[-1].removeprefix("RESULT "))


def by_id(outputs: list[dict[str, Any]], ids: list[str]) -> list[dict[str, Any]]:
    return sorted((o for o in outputs if o["id"] in ids), key=canonical)


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def main() -> None:
    from flink_agents.runtime.flink import read_json_files

    commit = check_clean_package()
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    target = HERE / f"{version}-{today}"
    if target.exists():
        sys.exit(f"{target} exists: a fixture is never regenerated")

    outputs, prompts = run_without_stop()
    before_ids = ENDED_BEFORE_STOP
    after_ids = [r["id"] for r in [*BATCH_2, *PROBES] if r["id"] not in before_ids]
    with tempfile.TemporaryDirectory(prefix="compat-fixture-") as directory:
        work = Path(directory)
        result = take(work)
        committed = read_json_files(work / "out")
        # The job agrees with the run without a stop up to the stop: same outputs, same calls.
        if sorted(committed, key=canonical) != by_id(outputs, before_ids):
            sys.exit(f"outputs before the stop differ from the local run's:\n{committed}")
        if sorted(result["held"]) != sorted(HELD) or result["log"] != LOG_AT_STOP:
            sys.exit(f"the state at the stop is not the one wanted: {result}")
        # Every request before the stop is one of the run without a stop; the restore
        # makes the others, the held calls again among them.
        answered, wanted = Counter(result["answered"]), Counter(prompts)
        if max(answered.values()) > 1 or not answered + Counter(HELD) <= wanted:
            sys.exit(f"requests before the stop {result} are not the local run's {prompts}")

        target.mkdir()
        shutil.copytree(result["savepoint"].removeprefix("file:"), target / "savepoint")
        shutil.copyfile(work / "action-log-copy.db", target / "action-log.db")
    memory = {o["key"]: o["memory"] for o in outputs if o["kind"] == "probe"}
    manifest = {
        "format": 1,
        "release": version,
        "taken": today,
        "taken_with": {
            "commit": commit,
            "package_commit": git(
                "log", "-1", "--format=%H", "--", "flink_agents", "pyproject.toml"
            ),
            "python": platform.python_version(),
            "pyflink": _version("apache-flink"),
            "execution_mode": "thread",
            "parallelism": 1,
        },
        "job_module": "tests.compat.compat_job",
        "agent": "tests.compat.compat_agents:CompatAgent",
        "job": JOB,
        "savepoint": "savepoint",
        "action_log": "action-log.db",
        "records": {"read_before_stop": [*BATCH_1, *BATCH_2], "probes": PROBES},
        "at_stop": {
            "runs_ended": before_ids,
            "calls_held_in_flight": HELD,
            "calls_answered": result["answered"],
            "log": result["log"],
            "outputs_committed": by_id(outputs, before_ids),
        },
        "restore": {
            "requests": sorted((Counter(prompts) - Counter(result["answered"])).elements()),
            "outputs": by_id(outputs, after_ids),
            "memory": memory,
        },
    }
    (target / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    (target / "README.md").write_text(README.format(**manifest, **manifest["taken_with"]))
    print(f"wrote {target}")


README = """# The compatibility fixture of release {release}, taken {taken}

Taken by `tests/compat/take_fixture.py` on main at commit {commit} (the package's code as of
commit {package_commit}), Python {python}, apache-flink {pyflink}, PyFlink's {execution_mode}
mode, parallelism {parallelism}. Never regenerated: see `tests/compat/README.md`.

- `savepoint/`: the savepoint of the job (`{job_module}`, agent `{agent}`), stopped with runs
  parked on calls in flight, inputs queued behind them and a fan-out group in flight.
- `action-log.db`: its SQLite action log (job `{job}`), copied after the job ended and
  before any held call was answered.
- `manifest.json`: the records read before the stop, what the log holds (`at_stop.log`), and
  what a restore must produce (`restore`: the requests it makes, its outputs, and each key's
  short-term memory).
"""


def _version(distribution: str) -> str:
    from importlib.metadata import version

    return version(distribution)


if __name__ == "__main__":
    main()
