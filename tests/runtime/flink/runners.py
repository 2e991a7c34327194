"""Running an agent on the local runner or on MiniCluster, the same way, for parity tests.

``run_agent`` runs one agent and returns its outputs. ``run_local`` and ``run_flink`` run
``Pipeline``s (an agent, its input, its options) and return what each produced: outputs,
error records, memory snapshots, or the failure that stopped it. ``run_flink`` builds every
pipeline it is given into one Flink job (a MiniCluster job costs seconds; a pipeline in it
costs little), in PyFlink's process or thread execution mode; ``run_flink_isolated`` does
the same in a child process, for a job that may hang.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JJavaError
from pyflink.common import Configuration, Types
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents.api import ActionExecutionError, AgentsExecutionEnvironment
from flink_agents.plan import AgentPlan, to_plan
from tests.runtime.flink.parity_agents import ModeProbeAgent

MODES = ("process", "thread")
"""PyFlink's Python execution modes: a worker process (beam), or Python inside the JVM."""


def flink_environment(
    parallelism: int = 2, mode: str | None = None, config: Mapping[str, str] | None = None
) -> StreamExecutionEnvironment:
    """A MiniCluster environment; ``mode`` sets ``python.execution-mode`` (None: left to
    ``AgentsExecutionEnvironment``, which chooses thread mode and its import path);
    ``config`` holds further Flink options (``state.backend.type``, ...)."""
    if mode is not None and mode not in MODES:
        raise ValueError(f"unknown execution mode {mode!r}")
    if mode is None and not config:
        env = StreamExecutionEnvironment.get_execution_environment()
    else:
        configuration = Configuration()
        for name, value in (config or {}).items():
            configuration.set_string(name, value)
        if mode is not None:
            configuration.set_string("python.execution-mode", mode)
        env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(parallelism)
    return env


def in_thread_mode_interpreter(probe: Callable[[], Any]) -> Any:
    """What ``probe`` returns in the thread-mode interpreter (the MiniCluster JVM's), called
    by a plain PyFlink map: the interpreter every thread-mode job of this process shares."""
    env = flink_environment(parallelism=1, mode="thread")
    stream = env.from_collection([0], type_info=Types.INT()).map(
        lambda _: probe(), output_type=Types.PICKLED_BYTE_ARRAY()
    )
    with stream.execute_and_collect() as results:
        (value,) = list(results)
    return value


def run_agent(runner: str, agent: Any, records: list, key: str, **options: Any) -> list:
    """The outputs of ``agent`` over ``records`` keyed by field ``key``."""
    if runner == "local":
        environment = AgentsExecutionEnvironment.get_execution_environment()
    else:
        environment = AgentsExecutionEnvironment.get_execution_environment(
            flink_environment(), **options
        )
    return environment.from_list(records, key).apply(agent).to_list()


@dataclass(frozen=True)
class Pipeline:
    """One agent over one input with its options, runnable on either runner.

    ``options`` are agent options and ``config`` entries of the plan's config; in both, a
    string's ``{dir}`` becomes the pipeline's own working directory on that runner (counter
    files, stores and logs must not be shared between the runs being compared).
    ``parallelism`` is the agent operator's (None: the job's).
    """

    name: str
    agent: Any
    records: list
    key: Any = "k"
    options: Mapping[str, Any] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    parallelism: int | None = None

    def prepare(self, work_dir: Path) -> tuple[AgentPlan, dict[str, Any]]:
        """The plan (renamed after the pipeline, so several fit in one job) and options."""
        directory = work_dir / self.name
        directory.mkdir(parents=True, exist_ok=True)
        plan = to_plan(self.agent)
        config = {**plan.config, **_fill(self.config, directory)}
        plan = plan.model_copy(update={"name": f"{plan.name}-{self.name}", "config": config})
        return plan, _fill(self.options, directory)


@dataclass
class Observed:
    """What a pipeline produced on one runner."""

    outputs: list[Any] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    snapshots: list[dict[str, Any]] | None = None
    """Memory snapshots, when the pipeline asked for them and the runner has them."""
    failure: str | None = None
    """The error that stopped the run (``fail`` policy): the local runner's
    ``ActionExecutionError`` message, or the whole text of the Flink job's failure."""


def run_local(pipeline: Pipeline, work_dir: Path) -> Observed:
    plan, options = pipeline.prepare(work_dir)
    environment = AgentsExecutionEnvironment.get_execution_environment(**options)
    builder = environment.from_list(pipeline.records, pipeline.key).apply(plan)
    try:
        outputs = builder.to_list()
    except ActionExecutionError as error:
        return Observed(failure=str(error))
    observed = Observed(outputs=outputs, errors=list(builder.error_stream()))
    if options.get("memory_snapshots") and hasattr(builder, "memory_stream"):
        observed.snapshots = list(builder.memory_stream())
    return observed


def run_flink(
    pipelines: Iterable[Pipeline],
    work_dir: Path,
    mode: str,
    parallelism: int = 2,
    probe_mode: bool = True,
    config: Mapping[str, str] | None = None,
) -> dict[str, Observed]:
    """Every pipeline in one MiniCluster job, plus with ``probe_mode`` the ``mode-probe``
    pipeline (whose output says whether the job's Python ran in thread mode); ``config``
    holds further Flink options of the job. A job that fails gives every pipeline its
    failure."""
    env = flink_environment(parallelism, mode, config)
    streams = []
    observed: dict[str, Observed] = {}
    for pipeline in [*pipelines, *([MODE_PROBE] if probe_mode else [])]:
        plan, options = pipeline.prepare(work_dir)
        agents = AgentsExecutionEnvironment.get_execution_environment(env, **options)
        builder = agents.from_list(pipeline.records, pipeline.key).apply(plan)
        outputs = builder.to_datastream()
        parallelism = pipeline.parallelism
        if parallelism is not None:
            outputs.set_parallelism(parallelism)
        streams.append(_tagged(outputs, "out", pipeline.name, parallelism))
        streams.append(_tagged(builder.error_stream(), "err", pipeline.name, parallelism))
        snapshots = None
        if options.get("memory_snapshots"):
            streams.append(_tagged(builder.memory_stream(), "mem", pipeline.name, parallelism))
            snapshots = []
        observed[pipeline.name] = Observed(snapshots=snapshots)
    union = streams[0].union(*streams[1:])
    try:
        with union.execute_and_collect() as results:
            collected = list(results)
    except Py4JJavaError as error:
        message = str(error)
        return {name: Observed(failure=message) for name in observed}
    for kind, name, value in collected:
        target = observed[name]
        if kind == "out":
            target.outputs.append(value)
        elif kind == "err":
            target.errors.append(value)
        else:
            target.snapshots.append(value)
    return observed


def _tagged(stream: Any, kind: str, name: str, parallelism: int | None) -> Any:
    """``(kind, name, value)`` for each value; at the agent's parallelism, so the records of
    a key reach the collecting sink in the order the agent emitted them (a rebalance in
    between would shuffle them)."""
    tag = (kind, name)
    tagged = stream.map(lambda value: (*tag, value), output_type=Types.PICKLED_BYTE_ARRAY())
    return tagged if parallelism is None else tagged.set_parallelism(parallelism)


def _fill(values: Mapping[str, Any], directory: Path) -> dict[str, Any]:
    return {
        name: value.replace("{dir}", str(directory)) if isinstance(value, str) else value
        for name, value in values.items()
    }


def failure_named(message: str) -> tuple[str, str, str, str] | None:
    """(action, key, run, cause) of the first ``ActionExecutionError`` message in text."""
    found = re.search(
        r"action '([^']+)' failed for key (.+?) \(run (\d+), input .*?\): (\w+: [^\n]*)",
        message,
    )
    return found.groups() if found else None


MODE_PROBE = Pipeline("mode-probe", ModeProbeAgent, [{"k": "probe"}])
