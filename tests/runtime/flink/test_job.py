"""The main job's graph (``build_agent_job``): every Python operator in the execution mode the
job runs in. PyFlink fixes an operator's mode when the operator is created, so the job's
default (thread mode) must be set before its first operator; a job mixing both modes runs
part of its Python in a Beam worker process, where timers are not restored.

Only the graph is built, nothing runs: each test costs well under a second once the JVM is up.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.plan import load_plan
from flink_agents.runtime.flink import JobPaths, build_agent_job
from tests.runtime.flink.runners import flink_environment

REPO = Path(__file__).resolve().parents[3]
PYTHON_OPERATORS = "org.apache.flink.streaming.api.operators.python."


def python_operators(env: StreamExecutionEnvironment) -> dict[str, list[str]]:
    """The class names of the job's Python operators (``ExternalPython...``: process mode,
    ``EmbeddedPython...``: thread mode), each with the names of the operators of that class,
    from the Java stream graph (built without clearing the job's transformations)."""
    from pyflink.java_gateway import get_gateway

    loader = get_gateway().jvm.Thread.currentThread().getContextClassLoader()
    graph = env._j_stream_execution_environment.getStreamGraph(False)
    found: dict[str, list[str]] = {}
    for node in graph.getStreamNodes().toArray():
        name = node.getOperatorFactory().getStreamOperatorClass(loader).getName()
        if name.startswith(PYTHON_OPERATORS):
            found.setdefault(name.rsplit(".", 1)[1], []).append(node.getOperatorName())
    return found


def main_job(env: StreamExecutionEnvironment, tmp_path: Path) -> StreamExecutionEnvironment:
    """``env`` with the main job over two input files (two sources, parsers and side outputs)
    and every sink, memory snapshots included."""
    (tmp_path / "in").mkdir()
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / "in" / name).write_text('{"user": "a", "id": "T-1", "text": "refund"}\n')
    paths = JobPaths(tmp_path / "in", tmp_path / "out", tmp_path / "err", tmp_path / "mem")
    plan = load_plan(REPO / "plans/support_triage.yaml")
    build_agent_job(env, plan, paths, "user", memory_snapshots=True)
    return env


def test_main_job_runs_every_python_operator_in_thread_mode_by_default(tmp_path):
    operators = python_operators(main_job(flink_environment(mode=None), tmp_path))
    external = {cls: names for cls, names in operators.items() if cls.startswith("External")}
    assert external == {}, "process-mode operators in a thread-mode job"
    # Not vacuous: the parsers, their key-by and side-output maps, the agent and the sinks.
    embedded = [name for cls, names in operators.items() for name in names]
    assert {"parse", "parse-1", "agent:support_triage", "outputs-json"} <= set(embedded)
    assert len(embedded) >= 10


def test_main_job_reads_signals_from_files_of_their_own(tmp_path):
    from flink_agents.examples.refunds import Approval

    env = flink_environment(mode=None)
    paths = JobPaths(
        REPO / "data/refund_requests.jsonl",
        tmp_path / "out",
        tmp_path / "err",
        signals=REPO / "data/refund_approvals.jsonl",
    )
    build_agent_job(
        env, load_plan(REPO / "plans/refunds.yaml"), paths, "customer", signal_type=Approval
    )
    embedded = [name for names in python_operators(env).values() for name in names]
    assert {"parse", "signals-parse", "agent-signals:refunds", "agent:refunds"} <= set(embedded)
    with pytest.raises(ValueError, match="signals need signal_type"):
        build_agent_job(
            flink_environment(mode=None), load_plan(REPO / "plans/refunds.yaml"), paths, "customer"
        )


def test_main_job_keeps_process_mode_when_the_job_chose_it(tmp_path):
    operators = python_operators(main_job(flink_environment(mode="process"), tmp_path))
    assert operators and all(cls.startswith("ExternalPython") for cls in operators), operators


def test_operators_built_after_get_execution_environment_run_in_thread_mode():
    """A user's own operators built after ``get_execution_environment(env)`` share the
    agent's mode (those built before it keep PyFlink's default: see the README)."""
    env = flink_environment(mode=None)
    agents = AgentsExecutionEnvironment.get_execution_environment(env)
    records = env.from_collection(["a", "b"], type_info=Types.STRING()).map(
        lambda text: {"k": text}, output_type=Types.PICKLED_BYTE_ARRAY()
    )
    plan = load_plan(REPO / "plans/support_triage.yaml")
    agents.from_datastream(records, "k").apply(plan).to_datastream().map(str).print()
    operators = python_operators(env)
    assert operators and all(cls.startswith("EmbeddedPython") for cls in operators), operators


pytestmark = pytest.mark.flink
