"""Bad records: lines that are not JSON objects or not UTF-8, records without a usable key
(missing field, unhashable value, a key selector that raises) and a huge record. Each bad one
goes to the error output with its reason (and for files the file and line), whatever the
error policy, while every good record around it is processed.

Where each case runs: ``flink-agents run`` (local batch over a file), the local runner's
``from_list``, MiniCluster's ``from_list`` and ``from_datastream``, and the main job
(``build_agent_job``: a file through Flink's ``FileSource``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flink_agents.api import AgentsExecutionEnvironment, FlinkAgentsError
from flink_agents.cli import main
from flink_agents.plan import compile_agent, save_plan
from tests.bad_input.agents import CatalogueAgent, Tag, parse_json, user_or_raise

REPO = Path(__file__).resolve().parents[2]
HUGE = 20 * 1024 * 1024  # characters in one record

# -- records as Python objects (from_list) -----------------------------------------------

MISSING = {"name": "x", "n": 1}
LIST_KEY = {"user": ["a"], "n": 2}
DICT_KEY = {"user": {"id": 1}, "n": 3}
NOT_A_MAPPING = "just text"
UNKEYABLE = [MISSING, LIST_KEY, DICT_KEY, NOT_A_MAPPING]
REJECTED = [
    {"kind": "rejected", "reason": "record has no key field 'user'", "input": MISSING},
    {"kind": "rejected", "reason": "key ['a'] is not hashable (list)", "input": LIST_KEY},
    {"kind": "rejected", "reason": "key {'id': 1} is not hashable (dict)", "input": DICT_KEY},
    {"kind": "rejected", "reason": "record has no key field 'user'", "input": NOT_A_MAPPING},
]


def with_good_records(huge: bool) -> list[Any]:
    records: list[Any] = [{"user": "a", "n": 0}, *UNKEYABLE, {"user": "a", "n": 5}]
    if huge:
        records.append({"user": "b", "n": 6, "text": "x" * HUGE})
    return [*records, {"user": "a", "n": 7}]


def seen_by_n(outputs: list[dict[str, Any]]) -> dict[int, list[int]]:
    return {o["n"]: o["seen"] for o in outputs}


GOOD_SEEN = {0: [0], 5: [0, 5], 7: [0, 5, 7]}


@pytest.mark.parametrize("policy", ["fail", "error-output", "retry"])
def test_local_unkeyable_records_go_to_the_error_output_whatever_the_policy(policy):
    env = AgentsExecutionEnvironment.get_execution_environment(error_policy=policy)
    builder = env.from_list(with_good_records(huge=True), "user").apply(CatalogueAgent)
    outputs = builder.to_list()
    assert seen_by_n(outputs) == {**GOOD_SEEN, 6: [6]}
    assert [o["text_length"] for o in outputs if "text_length" in o] == [HUGE]
    assert builder.error_stream() == REJECTED


def test_local_key_selector_that_raises_rejects_only_that_record():
    records = [
        {"user": "c", "n": 0},
        {"user": "c", "n": 1, "bad_selector": True},
        {"user": "c", "n": 2},
    ]
    env = AgentsExecutionEnvironment.get_execution_environment()
    builder = env.from_list(records, user_or_raise).apply(CatalogueAgent)
    assert seen_by_n(builder.to_list()) == {0: [0], 2: [0, 2]}
    [error] = builder.error_stream()
    assert (error["kind"], error["input"]) == ("rejected", records[1])
    assert "key selector raised ValueError: record 1 cannot be keyed" in error["reason"]


# -- files: the same lines for flink-agents run and the main job -----------------------


def bad_lines() -> list[bytes]:
    """Line ``i + 1`` of the input file; good ones are records of keys ``a`` and ``b``."""
    return [
        b'{"user": "a", "n": 1}',
        b'{"user": "a", "n": 2',
        b"[1, 2]",
        b'{"name": "x", "n": 4}',
        b'{"user": ["a"], "n": 5}',
        b'{"user": {"id": 1}, "n": 6}',
        b'{"user": "a", "n": 7, "case": "raise"}',
        b"",
        b'{"user": "b", "n": 9, "text": "' + b"x" * HUGE + b'"}',
        b'{"user": "a", "n": 10}',
        b'{"user": "a", "n": 11, "text": "caf\xe9"}',  # Latin-1, not UTF-8
        b'{"user": "a", "n": 12}',
    ]


NOT_UTF8_LINE = 11
FILE_OUTPUTS = {1: [1], 9: [9], 10: [1, 10], 12: [1, 10, 12]}


def rejected_lines(file: Path) -> list[dict[str, Any]]:
    """The error records of the lines that are not a keyable JSON object (UTF-8 aside)."""
    lines = bad_lines()
    reasons = {
        2: "invalid JSON (Expecting ',' delimiter, column 21)",
        3: "expected a JSON object, got list",
        4: "record has no key field 'user'",
        5: "key ['a'] is not hashable (list)",
        6: "key {'id': 1} is not hashable (dict)",
    }
    return [
        {
            "kind": "rejected",
            "reason": reason,
            "file": str(file),
            "line": line,
            "raw": lines[line - 1].decode(),
        }
        for line, reason in reasons.items()
    ]


def write_input(directory: Path) -> Path:
    path = directory / "input.jsonl"
    path.write_bytes(b"\n".join(bad_lines()) + b"\n")
    return path


@dataclass
class FileRun:
    input: Path
    outputs: list[Any]
    errors: list[dict[str, Any]]
    exit_code: int | None = None

    def rejected(self) -> list[dict[str, Any]]:
        return sorted(
            (e for e in self.errors if e["kind"] == "rejected" and e["line"] != NOT_UTF8_LINE),
            key=lambda e: e["line"],
        )

    def not_utf8(self) -> list[dict[str, Any]]:
        return [e for e in self.errors if e.get("line") == NOT_UTF8_LINE]


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory) -> Path:
    return save_plan(compile_agent(CatalogueAgent), tmp_path_factory.mktemp("plan") / "plan.yaml")


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory, plan_file) -> FileRun:
    directory = tmp_path_factory.mktemp("cli")
    data = write_input(directory)
    out, err = directory / "out.jsonl", directory / "err.jsonl"
    arguments = [str(plan_file), str(data), "--key", "user", "--output", str(out)]
    code = main(["run", *arguments, "--errors", str(err)])
    read = [[json.loads(x) for x in p.read_text().splitlines()] for p in (out, err)]
    return FileRun(data, *read, exit_code=code)


def test_cli_processes_every_good_line_in_order(cli_run):
    assert [(o["n"], o["seen"]) for o in cli_run.outputs] == list(FILE_OUTPUTS.items())
    assert [o.get("text_length") for o in cli_run.outputs if o["n"] == 9] == [HUGE]
    assert cli_run.exit_code == 1  # a run failed


def test_cli_rejects_each_bad_line_with_file_line_raw_text_and_reason(cli_run):
    assert cli_run.rejected() == rejected_lines(cli_run.input)


FAILED_RUN = {
    "kind": "failed_run",
    "key": "a",
    "input": {"user": "a", "n": 7, "case": "raise"},
    "run_sequence": 2,
    "action": "handle",
    "error": "ValueError: record 7 is bad",
    "attempts": 1,
}
"""The failed run of the file's line 7, the same record in every runner."""


def local_failed_run() -> dict[str, Any]:
    """The local runner's failed run over the file's good records (``from_list``)."""
    records = [json.loads(line) for n, line in enumerate(bad_lines(), 1) if n in (1, 7, 10)]
    env = AgentsExecutionEnvironment.get_execution_environment(error_policy="error-output")
    builder = env.from_list(records, "user").apply(CatalogueAgent)
    builder.to_list()
    [failed] = builder.error_stream()
    return failed


def test_cli_reports_a_failed_run_as_every_runner_does(cli_run):
    [failed] = [e for e in cli_run.errors if e["kind"] == "failed_run"]
    assert failed == FAILED_RUN


def test_cli_and_local_runner_failed_runs_have_the_same_fields(cli_run):
    """One error-record shape: ``flink-agents run`` adds nothing of its own (``file`` and
    ``line`` are for ``rejected`` lines only)."""
    [failed] = [e for e in cli_run.errors if e["kind"] == "failed_run"]
    assert set(failed) == set(local_failed_run()) == set(FAILED_RUN)


def test_cli_rejects_a_line_that_is_not_utf8_and_goes_on(cli_run):
    [error] = cli_run.not_utf8()
    assert (error["kind"], error["file"], error["line"]) == ("rejected", str(cli_run.input), 11)
    assert "UTF-8" in error["reason"]


def run_in_a_subprocess(plan: Path, data: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flink_agents", "run", str(plan), str(data), "--key", "user"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ["PYTHONPATH"]])},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("kind", ["missing", "a directory"])
def test_cli_input_that_cannot_be_read_is_one_line_naming_it(tmp_path, plan_file, kind):
    data = tmp_path / "input.jsonl"
    if kind == "a directory":
        data.mkdir()
    result = run_in_a_subprocess(plan_file, data, tmp_path)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert str(data) in line and line.startswith("error: ")
    assert result.stdout == ""


# -- MiniCluster: from_list and from_datastream ---------------------------------------


@dataclass
class FlinkRun:
    outputs: dict[str, list[Any]]
    errors: dict[str, list[dict[str, Any]]]


@pytest.fixture(scope="module")
def keys_job() -> FlinkRun:
    """``from_list`` (``fail`` policy) with records whose key cannot be taken, and
    ``from_datastream`` (``retry`` policy) with a key selector that raises, in one job."""
    from pyflink.common import Types

    from tests.runtime.flink.runners import flink_environment

    env = flink_environment(parallelism=2)
    pickled = Types.PICKLED_BYTE_ARRAY()
    lines = [
        {"user": "c", "n": 0},
        {"user": "c", "n": 1, "bad_selector": True},
        {"user": "c", "n": 2},
    ]
    stream = env.from_collection([json.dumps(r) for r in lines], type_info=Types.STRING())
    stream = stream.map(parse_json, output_type=pickled)
    inputs = {
        "from_list": ("fail", lambda agents: agents.from_list(with_good_records(False), "user")),
        "from_datastream": ("retry", lambda agents: agents.from_datastream(stream, user_or_raise)),
    }
    streams = []
    for name, (policy, source) in inputs.items():
        agents = AgentsExecutionEnvironment.get_execution_environment(env, error_policy=policy)
        plan = compile_agent(CatalogueAgent).model_copy(update={"name": name})
        builder = source(agents).apply(plan)
        streams.append(builder.to_datastream().map(Tag(f"{name} output"), output_type=pickled))
        streams.append(builder.error_stream().map(Tag(f"{name} error"), output_type=pickled))
    run = FlinkRun({}, {})
    with streams[0].union(*streams[1:]).execute_and_collect() as results:
        for tag, value in results:
            name, kind = tag.split(" ")
            (run.outputs if kind == "output" else run.errors).setdefault(name, []).append(value)
    return run


@pytest.mark.flink
def test_minicluster_from_list_rejects_unkeyable_records_and_runs_the_others(keys_job):
    assert seen_by_n(keys_job.outputs["from_list"]) == GOOD_SEEN
    assert sorted(keys_job.errors["from_list"], key=repr) == sorted(REJECTED, key=repr)


@pytest.mark.flink
def test_minicluster_from_datastream_rejects_a_record_its_selector_cannot_key(keys_job):
    assert seen_by_n(keys_job.outputs["from_datastream"]) == {0: [0], 2: [0, 2]}
    [error] = keys_job.errors["from_datastream"]
    assert (error["kind"], error["input"]) == (
        "rejected",
        {"user": "c", "n": 1, "bad_selector": True},
    )
    assert "key selector raised ValueError: record 1 cannot be keyed" in error["reason"]


# -- MiniCluster: the main job over a file ----------------------------------------------


@pytest.fixture(scope="module")
def main_job(tmp_path_factory, plan_file) -> FileRun:
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment

    from flink_agents.plan import load_plan
    from flink_agents.runtime.flink import JobPaths, build_agent_job, read_json_files

    directory = tmp_path_factory.mktemp("main-job")
    data = write_input(directory)
    config = Configuration()
    config.set_string("restart-strategy.type", "none")  # a failure must fail, not loop
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(2)
    paths = JobPaths(data, directory / "outputs", directory / "errors")
    build_agent_job(env, load_plan(plan_file), paths, "user", 1000, error_policy="error-output")
    env.execute("bad input")
    return FileRun(data, read_json_files(paths.output), read_json_files(paths.errors))


@pytest.mark.flink
def test_main_job_processes_every_good_line(main_job):
    outputs = {o["n"]: o["seen"] for o in main_job.outputs}
    assert outputs == FILE_OUTPUTS
    assert [o.get("text_length") for o in main_job.outputs if o["n"] == 9] == [HUGE]


@pytest.mark.flink
def test_main_job_rejects_each_bad_line_with_file_line_raw_text_and_reason(main_job):
    assert main_job.rejected() == rejected_lines(main_job.input)


@pytest.mark.flink
def test_main_job_reports_a_failed_run_as_every_runner_does(main_job, cli_run):
    """The same record, field for field, as ``flink-agents run`` and the local runner."""
    [failed] = [e for e in main_job.errors if e["kind"] == "failed_run"]
    assert failed == FAILED_RUN
    [cli_failed] = [e for e in cli_run.errors if e["kind"] == "failed_run"]
    assert set(failed) == set(cli_failed) == set(local_failed_run())


@pytest.mark.flink
def test_main_job_rejects_a_line_that_is_not_utf8(main_job):
    [error] = main_job.not_utf8()
    assert (error["kind"], error["file"], error["line"]) == ("rejected", str(main_job.input), 11)
    assert "UTF-8" in error["reason"]
    assert NOT_UTF8_LINE not in {o["n"] for o in main_job.outputs}


@pytest.mark.flink
def test_main_job_refuses_a_missing_input_file_before_it_starts(tmp_path):
    from flink_agents.plan import to_plan
    from flink_agents.runtime.flink import JobPaths, build_agent_job
    from tests.runtime.flink.runners import flink_environment

    missing = tmp_path / "input.jsonl"
    paths = JobPaths(missing, tmp_path / "outputs", tmp_path / "errors")
    with pytest.raises((FlinkAgentsError, OSError), match=str(missing)):
        build_agent_job(flink_environment(), to_plan(CatalogueAgent), paths, "user")
