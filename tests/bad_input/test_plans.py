"""Bad plan files: each error names the file, the agent, the action or resource and the field.

``tests/plan/test_invalid_plans.py`` covers the basic catalogue (unknown event types and
functions, wrong signatures, missing function, misspelled fields, duplicate action names,
unknown resource types, unparsable files). This file adds what users also write: mistyped
values, missing action names and event lists, duplicate resource names, keys written twice
in YAML or JSON (which the parsers would silently drop), an empty file, code that fails to
import, and bad plans handed to ``flink-agents run``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from flink_agents.api import PlanError
from flink_agents.cli import main
from flink_agents.plan import load_plan

AGENTS = "tests.bad_input.agents"
VALID: dict[str, Any] = {
    "name": "catalogue",
    "actions": [
        {
            "name": "handle",
            "function": f"{AGENTS}:CatalogueAgent.handle",
            "listen_to": ["InputEvent"],
        }
    ],
}


def plan_with(change) -> dict[str, Any]:
    plan = copy.deepcopy(VALID)
    change(plan)
    return plan


def first_action(**fields):
    return lambda plan: plan["actions"][0].update(fields)


def resources(*items):
    return lambda plan: plan.update(resources=list(items))


def without(field):
    return lambda plan: plan["actions"][0].pop(field)


TOOL = {"name": "lookup", "type": "tool", "provider": f"{AGENTS}:user_or_raise"}

CASES: dict[str, tuple[Any, str]] = {
    # mistyped values
    "function is a number": (
        first_action(function=42),
        "agent 'catalogue', action 'handle', field 'function': expected a string, got int 42",
    ),
    "event type is a number": (
        first_action(listen_to=["InputEvent", 7]),
        "agent 'catalogue', action 'handle', field 'listen_to[1]': expected a string, got int 7",
    ),
    "action name is a number": (
        first_action(name=3),
        "agent 'catalogue', action '#1', field 'name': expected a string, got int 3",
    ),
    "action is not a mapping": (
        lambda plan: plan.update(actions=["handle"]),
        "agent 'catalogue', action '#1': expected a mapping, got str",
    ),
    "actions is a mapping": (
        lambda plan: plan.update(actions={"handle": {}}),
        "agent 'catalogue', field 'actions': expected a list, got dict {'handle': {}}",
    ),
    "action config is a string": (
        first_action(config="fast"),
        "agent 'catalogue', action 'handle', field 'config': expected a mapping, got str 'fast'",
    ),
    "resource args is a list": (
        resources({**TOOL, "args": ["x"]}),
        "agent 'catalogue', resource 'lookup', field 'args': expected a mapping, got list ['x']",
    ),
    "description is a number": (
        lambda plan: plan.update(description=5),
        "agent 'catalogue', field 'description': expected a string, got int 5",
    ),
    # missing fields
    "missing listen_to": (
        without("listen_to"),
        "agent 'catalogue', action 'handle', field 'listen_to': required field is missing",
    ),
    "missing action name": (
        without("name"),
        "agent 'catalogue', action '#1', field 'name': required field is missing",
    ),
    "missing resource provider": (
        resources({"name": "lookup", "type": "tool"}),
        "agent 'catalogue', resource 'lookup', field 'provider': required field is missing",
    ),
    "two problems in one action": (
        lambda plan: plan.update(actions=[{"name": "handle", "listen_to": []}]),
        "agent 'catalogue', action 'handle', field 'function': required field is missing "
        "(and 1 more problem)",
    ),
    "misspelled top-level field": (
        lambda plan: plan.update(resource=[TOOL]),
        "agent 'catalogue', field 'resource': unknown field; allowed fields are plan_version, "
        "name, description, actions, resources, config",
    ),
    # duplicate names
    "duplicate resource name": (
        resources(TOOL, TOOL),
        "agent 'catalogue', resource 'lookup', field 'name': duplicate resource name 'lookup'",
    ),
    "duplicate action name further down": (
        lambda plan: plan["actions"].extend(
            [{**plan["actions"][0], "name": "b"}, {**plan["actions"][0], "name": "b"}]
        ),
        "agent 'catalogue', action 'b', field 'name': duplicate action name 'b'",
    ),
    # unknown code
    "function in a module that fails to import": (
        first_action(function=f"{__package__}.explodes_on_import:handle"),
        "agent 'catalogue', action 'handle', field 'function': cannot import "
        f"'{__package__}.explodes_on_import:handle': importing "
        f"'{__package__}.explodes_on_import' raised RuntimeError: this module reads a setting "
        "that is not there",
    ),
    "event type in a missing module": (
        first_action(listen_to=["nowhere.events:Ticket"]),
        "agent 'catalogue', action 'handle', field 'listen_to[0]': unknown event type: "
        "cannot import 'nowhere.events:Ticket': no module named 'nowhere'",
    ),
    "event type named by a misspelled class": (
        first_action(listen_to=[f"{AGENTS}:Pnig"]),
        "agent 'catalogue', action 'handle', field 'listen_to[0]': unknown event type: "
        f"cannot import '{AGENTS}:Pnig': '{AGENTS}' has no attribute 'Pnig'",
    ),
    "function nested in a misspelled class": (
        first_action(function=f"{AGENTS}:CatalogAgent.handle"),
        "agent 'catalogue', action 'handle', field 'function': "
        f"cannot import '{AGENTS}:CatalogAgent.handle': '{AGENTS}' has no attribute "
        "'CatalogAgent'",
    ),
    "resource provider is not callable": (
        resources({**TOOL, "provider": f"{AGENTS}:CatalogueAgent.__doc__"}),
        "agent 'catalogue', resource 'lookup', field 'provider': "
        f"'{AGENTS}:CatalogueAgent.__doc__' is a str, not callable",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_plan_names_file_agent_item_and_field(tmp_path, case):
    change, expected = CASES[case]
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan_with(change)))
    with pytest.raises(PlanError) as caught:
        load_plan(path)
    assert str(caught.value) == f"{path}: {expected}"


def test_the_base_plan_is_valid(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(VALID))
    assert [a.name for a in load_plan(path).actions] == ["handle"]


def test_a_resource_error_carries_its_place_as_attributes(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan_with(resources(TOOL, TOOL))))
    with pytest.raises(PlanError) as caught:
        load_plan(path)
    error = caught.value
    assert (error.file, error.agent, error.action, error.resource, error.field) == (
        str(path),
        "catalogue",
        None,
        "lookup",
        "name",
    )


ACTION = f"""\
  - name: handle
    function: {AGENTS}:CatalogueAgent.handle
    listen_to: [InputEvent]
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            f"name: catalogue\nactions:\n{ACTION}    function: {AGENTS}:CatalogueAgent.again\n",
            "agent 'catalogue', action 'handle', field 'function': duplicate key 'function' at "
            "lines 4 and 6: YAML would keep only the last one",
        ),
        (
            f"name: catalogue\nactions:\n{ACTION}name: other\n",
            "agent 'other', field 'name': duplicate key 'name' at lines 1 and 6: YAML would "
            "keep only the last one",
        ),
        (
            f"name: catalogue\nactions:\n{ACTION}actions:\n{ACTION}",
            "agent 'catalogue', field 'actions': duplicate key 'actions' at lines 2 and 6: YAML "
            "would keep only the last one",
        ),
        ("", "the plan is empty: expected a mapping with name and actions"),
        ("# only a comment\n", "the plan is empty: expected a mapping with name and actions"),
    ],
    ids=["key twice in an action", "agent name twice", "actions twice", "empty", "comment only"],
)
def test_yaml_written_twice_or_not_at_all(tmp_path, text, expected):
    """``yaml.safe_load`` keeps the last of two equal keys: half a plan would vanish."""
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    with pytest.raises(PlanError) as caught:
        load_plan(path)
    assert str(caught.value) == f"{path}: {expected}"


def test_json_key_written_twice(tmp_path):
    path = tmp_path / "plan.json"
    action = json.dumps(VALID["actions"][0])
    path.write_text(f'{{"name": "catalogue", "actions": [{action}], "name": "other"}}')
    with pytest.raises(PlanError) as caught:
        load_plan(path)
    assert str(caught.value) == (
        f"{path}: duplicate key 'name' in one JSON object: JSON would keep only the last"
    )


# -- through the command line ----------------------------------------------------------


def run_cli(tmp_path: Path, plan: dict[str, Any]) -> tuple[int, Path, Path]:
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(yaml.safe_dump(plan))
    data = tmp_path / "in.jsonl"
    data.write_text('{"user": "a", "n": 1}\n')
    out, err = tmp_path / "out.jsonl", tmp_path / "err.jsonl"
    arguments = [str(plan_path), str(data), "--key", "user", "--output", str(out)]
    return main(["run", *arguments, "--errors", str(err)]), plan_path, out


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            first_action(function=f"{AGENTS}:CatalogueAgent.hadle"),
            "agent 'catalogue', action 'handle', field 'function': cannot import "
            f"'{AGENTS}:CatalogueAgent.hadle': '{AGENTS}:CatalogueAgent' has no attribute "
            "'hadle'",
        ),
        (
            first_action(listen_to=["InputEvnt"]),
            "agent 'catalogue', action 'handle', field 'listen_to': listen_to[0] = 'InputEvnt' "
            "is not an event type: use module:ClassName or one of ['Event', 'InputEvent', "
            "'OutputEvent']",
        ),
    ],
    ids=["unknown function", "unknown event type"],
)
def test_run_with_a_bad_plan_exits_2_with_one_line_and_runs_nothing(
    tmp_path, capsys, change, expected
):
    code, plan_path, out = run_cli(tmp_path, plan_with(change))
    assert code == 2
    assert capsys.readouterr().err == f"error: {plan_path}: {expected}\n"
    assert not out.exists() or out.read_text() == ""


def test_run_with_the_base_plan_processes_the_record(tmp_path):
    code, _, out = run_cli(tmp_path, VALID)
    assert code == 0
    assert [json.loads(line) for line in out.read_text().splitlines()] == [
        {"user": "a", "n": 1, "seen": [1]}
    ]
