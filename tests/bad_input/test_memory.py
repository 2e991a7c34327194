"""Bad memory use inside actions: malformed paths, values that cannot be stored, and a value
of 20 MB. A refused write fails its action with an error naming the path (and for values the
type); the key's memory keeps what it had, and the key's next runs go on.

Local runner here; MiniCluster through the shared ``catalogue_job`` (conftest.py).
``tests/memory/test_values_and_paths.py`` checks the same rules on memory objects directly.
"""

from __future__ import annotations

import pytest

from flink_agents.api import ActionExecutionError, MemoryValueError
from flink_agents.runtime import LocalRunner
from tests.bad_input import cases
from tests.bad_input.agents import CatalogueAgent

FAILING = {name: case for name, case in cases.MEMORY.items() if case.error}


# -- local runner ----------------------------------------------------------------------


@pytest.mark.parametrize("name", list(FAILING))
def test_a_refused_write_fails_the_action_and_leaves_memory_as_it_was(name):
    case = cases.MEMORY[name]
    runner = LocalRunner(CatalogueAgent)
    runner.run("m", {"user": "m", "n": 0})
    with pytest.raises(ActionExecutionError) as caught:
        runner.run("m", {"user": "m", "n": 1, **case.fields})
    cause = caught.value.cause
    assert caught.value.action == "handle"
    assert f"{type(cause).__name__}: {cause}" == case.error
    assert runner.short_term_memory("m") == {"seen": [0]}
    assert runner.run("m", {"user": "m", "n": 2}) == [{"user": "m", "n": 2, "seen": [0, 2]}]


def test_good_runs_around_refused_writes_keep_their_memory():
    records = cases.interleaved(cases.MEMORY, "m", 1000)
    runner = LocalRunner(CatalogueAgent)
    seen = {}
    for record in records:
        try:
            [output] = runner.run("m", record)
        except ActionExecutionError:
            continue
        seen[output["n"]] = output["seen"]
    assert seen == cases.expected_seen(records, cases.MEMORY)


def test_a_20_mb_value_round_trips():
    runner = LocalRunner(CatalogueAgent)
    [written] = runner.run("m", {"user": "m", "n": 0, "case": "big_write", "size": cases.BIG})
    [read] = runner.run("m", {"user": "m", "n": 1, "case": "big_read"})
    assert written["blob"] == cases.BIG
    assert (read["blob"], read["intact"]) == (cases.BIG, True)


@pytest.mark.parametrize("name", list(cases.UNSERIALIZABLE_MODELS))
def test_an_unserializable_model_is_refused_at_set_naming_path_and_type(name):
    case, type_names = cases.UNSERIALIZABLE_MODELS[name]
    runner = LocalRunner(CatalogueAgent)
    with pytest.raises(ActionExecutionError) as caught:
        runner.run("p", {"user": "p", "n": 0, **case.fields})
    cause = caught.value.cause
    assert isinstance(cause, MemoryValueError), repr(cause)
    assert "'slot" in str(cause)
    assert any(type_name in str(cause) for type_name in type_names), str(cause)
    assert runner.short_term_memory("p") == {}


# -- MiniCluster ---------------------------------------------------------------------------


@pytest.mark.flink
@pytest.mark.parametrize("name", list(FAILING))
def test_minicluster_refused_write_names_the_path(catalogue_job, name):
    [record] = [r for r in catalogue_job.records if r.get("label") == name]
    error = catalogue_job.error(record["n"])
    assert (error["key"], error["action"]) == ("m", "handle")
    assert error["error"] == cases.MEMORY[name].error


@pytest.mark.flink
def test_minicluster_good_runs_around_refused_writes_keep_their_memory(catalogue_job):
    records = [r for r in catalogue_job.records if r["user"] == "m"]
    outputs = [o for o in catalogue_job.outputs["error-output"] if o["user"] == "m"]
    assert {o["n"]: o["seen"] for o in outputs} == cases.expected_seen(records, cases.MEMORY)


@pytest.mark.flink
def test_minicluster_a_20_mb_value_round_trips_through_map_state(catalogue_job):
    [write] = [r for r in catalogue_job.records if r.get("case") == "big_write"]
    [read] = [r for r in catalogue_job.records if r.get("case") == "big_read"]
    assert catalogue_job.output(write["n"])["blob"] == cases.BIG
    output = catalogue_job.output(read["n"])
    assert (output["blob"], output["intact"]) == (cases.BIG, True)


@pytest.mark.flink
@pytest.mark.parametrize("name", list(cases.UNSERIALIZABLE_MODELS))
def test_minicluster_unserializable_model_is_refused_at_set(catalogue_job, name):
    _, type_names = cases.UNSERIALIZABLE_MODELS[name]
    [record] = [r for r in catalogue_job.records if r.get("label") == name]
    error = catalogue_job.error(record["n"])["error"]
    assert error.startswith("MemoryValueError: "), error
    assert "'slot" in error
    assert any(type_name in error for type_name in type_names), error
