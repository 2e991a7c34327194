"""One MiniCluster job plays the whole catalogue of bad actions and bad memory use (a job
costs seconds, a record milliseconds); the tests of ``test_actions.py`` and
``test_memory.py`` read its results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.bad_input import cases
from tests.bad_input.agents import CatalogueAgent, Tag

RETRY_RECORDS = [
    {"user": "r", "n": 3000, "case": "flaky", "fail_times": 2},  # succeeds at attempt 3
    {"user": "r", "n": 3001},
    {"user": "r", "n": 3002, "case": "flaky", "fail_times": 9},  # gives up after 3
    {"user": "r", "n": 3003},
]


@dataclass
class CatalogueJob:
    """What the MiniCluster job emitted, by pipeline (``error-output`` or ``retry``)."""

    records: list[dict[str, Any]]
    outputs: dict[str, list[Any]] = field(default_factory=dict)
    errors: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def output(self, n: int) -> dict[str, Any]:
        [found] = [o for outputs in self.outputs.values() for o in outputs if o["n"] == n]
        return found

    def error(self, n: int) -> dict[str, Any]:
        [found] = [e for errors in self.errors.values() for e in errors if e["input"]["n"] == n]
        return found


def catalogue_records() -> list[dict[str, Any]]:
    """Bad actions for key ``u``, bad memory use for ``m``, unserializable models for ``p``,
    each bad record followed by a good one of its key; and a key ``v`` with good records."""
    models = {name: case for name, (case, _) in cases.UNSERIALIZABLE_MODELS.items()}
    return [
        *cases.interleaved(cases.ACTIONS, "u", 0),
        *cases.interleaved(cases.MEMORY, "m", 1000),
        *cases.interleaved(models, "p", 2000),
        *({"user": "v", "n": n} for n in range(4000, 4005)),
    ]


@pytest.fixture(scope="session")
def catalogue_job(tmp_path_factory) -> CatalogueJob:
    from pyflink.common import Types

    from flink_agents.api import AgentsExecutionEnvironment
    from flink_agents.plan import compile_agent
    from tests.runtime.flink.runners import flink_environment

    counters = tmp_path_factory.mktemp("retry-counters")
    job = CatalogueJob(catalogue_records())
    retry_records = [{**r, "counter_dir": str(counters)} for r in RETRY_RECORDS]
    env = flink_environment(parallelism=2)
    pickled = Types.PICKLED_BYTE_ARRAY()
    streams = []
    for policy, records, options in [
        ("error-output", job.records, {"max_steps_per_run": cases.MAX_STEPS}),
        ("retry", retry_records, {"retry_max_attempts": 3, "retry_initial_backoff_ms": 20}),
    ]:
        agents = AgentsExecutionEnvironment.get_execution_environment(
            env, error_policy=policy, **options
        )
        # Two operators of one plan in one job would share the uid "agent:<plan name>".
        plan = compile_agent(CatalogueAgent).model_copy(update={"name": f"catalogue-{policy}"})
        builder = agents.from_list(records, "user").apply(plan)
        streams.append(builder.to_datastream().map(Tag(f"{policy} output"), output_type=pickled))
        streams.append(builder.error_stream().map(Tag(f"{policy} error"), output_type=pickled))
    with streams[0].union(*streams[1:]).execute_and_collect() as results:
        for tag, value in results:
            policy, kind = tag.split(" ")
            target = job.outputs if kind == "output" else job.errors
            target.setdefault(policy, []).append(value)
    return job
