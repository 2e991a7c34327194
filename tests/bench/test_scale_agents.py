"""``bench.scale_agents``: the memory of many fields ``bench/scale.py`` measures, built and
touched as it says, by the agent and by the raw function alike."""

from __future__ import annotations

import pytest

from bench import scale_agents
from bench.scale_agents import FieldsAgent, leaf_paths, leaf_value, parse_record
from flink_agents.api import AgentsExecutionEnvironment


@pytest.mark.parametrize(("fields", "depth"), [(10, 2), (100, 3), (1000, 4)])
def test_a_tree_of_objects_of_ten_fields_each(fields: int, depth: int):
    paths = leaf_paths(fields)
    assert len(set(paths)) == fields
    assert {path.count(".") + 1 for path in paths} == {depth}
    parents = {path.rsplit(".", 1)[0] for path in paths}
    assert len(parents) == fields // 10  # ten leaves under each innermost object


def test_only_powers_of_ten():
    with pytest.raises(ValueError, match="power of 10"):
        leaf_paths(50)


def test_the_agent_fills_its_memory_once_then_touches_a_few_fields():
    keys, fields, per_key = 3, 100, 4
    records = [scale_agents.ToFieldsRecord(keys, fields)(n) for n in range(keys * per_key)]
    environment = AgentsExecutionEnvironment.get_execution_environment(memory_snapshots=True)
    builder = environment.from_list(records, lambda r: r[0]).apply(FieldsAgent)
    outputs = builder.to_list()
    counts = sorted((key, count) for key, count, read in outputs if read)
    assert counts == [(f"k{k}", c) for k in range(keys) for c in range(1, per_key + 1)]
    final = builder.memory_stream()[-1]["short_term_memory"]
    assert final["count"] == per_key
    profile = final["profile"]
    leaves = [value for section in profile.values() for value in section.values()]
    assert len(leaves) == fields
    assert leaf_value(5) == [5, 6, 7] and leaf_value(6) == 6


def test_input_lines_parse_to_records():
    assert parse_record("k12,345") == ("k12", 345)
