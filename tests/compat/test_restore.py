"""Every compatibility fixture restores with the current code (issue 40): a savepoint and an
action log taken by a job of an earlier release give the outputs, the memory and the model
requests that release's run without a stop gives (``tests/compat/README.md``).

Each fixture directory is copied to a temporary directory first (its savepoint must not
depend on where it was taken or is kept; the copy also keeps the restore's writes out of
the fixture). The job its manifest names runs in a child process, in PyFlink's thread mode,
restored from the savepoint with the copied action log under the job name it was written
with, and a scripted server answering every model. It runs until the outputs of every
restored run and queued input are committed (their runs wake by themselves: nothing else is
read meanwhile), then reads one probe per key, which outputs the key's short-term memory
once every run before it has ended.

What must come out: exactly the outputs the manifest lists (nothing of what was committed
before the stop again), each key's short-term memory as listed, no sensory memory left, and
exactly the requests listed: the calls that were in flight at the stop, and those of the
runs that had not started. A call whose result the log held is not made again.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from flink_agents.runtime.flink import read_json_files
from tests.children import run_child_job

HERE = Path(__file__).resolve().parent
FIXTURES = sorted(path.parent for path in HERE.glob("*/manifest.json"))


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


class Restored(NamedTuple):
    """What a restore of a fixture gave."""

    manifest: dict[str, Any]
    outputs: list[dict[str, Any]]
    """Every output committed after the restore."""
    requests: list[str]
    """The last user message of every request the scripted server answered."""


def restore(fixture: Path, tmp_path: Path) -> Restored:
    """Restore a copy of ``fixture`` (see the module docstring)."""
    copy = tmp_path / "fixture"
    shutil.copytree(fixture, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    expected = manifest["restore"]
    probes = manifest["records"]["probes"]
    spec = {
        "mode": "restore",
        "job": manifest["job"],
        "action_log": f"sqlite://{copy / manifest['action_log']}",
        "savepoint": str(copy / manifest["savepoint"]),
        "work": str(tmp_path / "work"),
        "batches": [
            {
                "file": None,
                "records": [],
                "wait_ids": sorted(
                    {output["id"] for output in expected["outputs"]}
                    - {probe["id"] for probe in probes}
                ),
            },
            {"file": "probes.jsonl", "records": probes, "wait_ids": [p["id"] for p in probes]},
        ],
    }
    spec_file = tmp_path / "restore.json"
    spec_file.write_text(json.dumps(spec))
    result = run_child_job(manifest["job_module"], spec_file, f"the restore of {fixture.name}")
    return Restored(manifest, read_json_files(tmp_path / "work" / "out"), result["answered"])


@pytest.mark.slow
@pytest.mark.flink
@pytest.mark.parametrize("fixture", FIXTURES, ids=[path.name for path in FIXTURES])
def test_a_fixture_of_an_earlier_release_restores_with_every_output_and_memory_value(
    fixture: Path, tmp_path: Path
) -> None:
    manifest, outputs, requests = restore(fixture, tmp_path)
    expected = manifest["restore"]
    probes = {output["key"]: output for output in outputs if output["kind"] == "probe"}
    assert {key: probe["memory"] for key, probe in probes.items()} == expected["memory"]
    assert all(probe["sensory"] == [] for probe in probes.values()), probes
    # Exactly once each: nothing committed before the stop comes out again.
    assert sorted(outputs, key=canonical) == sorted(expected["outputs"], key=canonical)
    # The calls in flight at the stop and those of runs not started, each once; none of the
    # calls the log held.
    assert Counter(requests) == Counter(expected["requests"])


def test_there_is_a_fixture() -> None:
    """A glob that found nothing would leave the promise untested and the suite green."""
    assert FIXTURES, f"no fixture (a directory with a manifest.json) under {HERE}"
