"""Invalid plans fail at load with the exact place: file, agent, action or resource, field."""

import copy

import pytest
import yaml

from flink_agents.api import PlanError
from flink_agents.plan import load_plan

VALID = {
    "name": "triage",
    "actions": [
        {
            "name": "classify",
            "function": "flink_agents.examples.support_triage:classify",
            "listen_to": ["InputEvent"],
        }
    ],
}
ST = "flink_agents.examples.support_triage"


def _action(**changes):
    def mutate(plan):
        plan["actions"][0].update(changes)

    return mutate


def _drop_action_field(name):
    def mutate(plan):
        del plan["actions"][0][name]

    return mutate


def _set(**changes):
    def mutate(plan):
        plan.update(changes)

    return mutate


def _duplicate_action(plan):
    plan["actions"].append(dict(plan["actions"][0]))


CASES = {
    "unimportable module": (
        _action(function="no_such_module:classify"),
        "agent 'triage', action 'classify', field 'function': "
        "cannot import 'no_such_module:classify': no module named 'no_such_module'",
    ),
    "missing attribute": (
        _action(function=f"{ST}:clasify"),
        f"agent 'triage', action 'classify', field 'function': "
        f"cannot import '{ST}:clasify': '{ST}' has no attribute 'clasify'",
    ),
    "not a function": (
        _action(function=f"{ST}:CATEGORIES"),
        f"agent 'triage', action 'classify', field 'function': '{ST}:CATEGORIES' is a dict, "
        "not a function",
    ),
    "reference without colon": (
        _action(function=ST),
        f"agent 'triage', action 'classify', field 'function': '{ST}' is not a reference: "
        "write it as 'package.module:qualified_name'",
    ),
    "wrong signature": (
        _action(function="flink_agents.plan._refs:ref_of"),
        "agent 'triage', action 'classify', field 'function': an action takes (event, ctx), "
        "but 'flink_agents.plan._refs:ref_of' has signature (obj: 'Any') -> 'str'",
    ),
    "unknown event type": (
        _action(listen_to=["InputEvent", f"{ST}:TicketClosed"]),
        f"agent 'triage', action 'classify', field 'listen_to[1]': unknown event type: "
        f"cannot import '{ST}:TicketClosed': '{ST}' has no attribute 'TicketClosed'",
    ),
    "event type that is not an Event": (
        _action(listen_to=[f"{ST}:classify"]),
        f"agent 'triage', action 'classify', field 'listen_to[0]': unknown event type: "
        f"'{ST}:classify' is not a subclass of flink_agents.api.Event",
    ),
    "misspelled built-in event": (
        _action(listen_to=["Inputevent"]),
        "agent 'triage', action 'classify', field 'listen_to': listen_to[0] = 'Inputevent' is "
        "not an event type: use module:ClassName or one of ['Event', 'InputEvent', 'OutputEvent']",
    ),
    "no event type": (
        _action(listen_to=[]),
        "agent 'triage', action 'classify', field 'listen_to': must name at least one event type",
    ),
    "duplicate action name": (
        _duplicate_action,
        "agent 'triage', action 'classify', field 'name': duplicate action name 'classify'",
    ),
    "missing function": (
        _drop_action_field("function"),
        "agent 'triage', action 'classify', field 'function': required field is missing",
    ),
    "missing agent name": (
        lambda plan: plan.pop("name"),
        "field 'name': required field is missing",
    ),
    "wrong type for listen_to": (
        _action(listen_to="InputEvent"),
        "agent 'triage', action 'classify', field 'listen_to': expected a list, "
        "got str 'InputEvent'",
    ),
    "wrong type for config": (
        _set(config=[1, 2]),
        "agent 'triage', field 'config': expected a mapping, got list [1, 2]",
    ),
    "misspelled field": (
        _action(functon="x:y"),
        "agent 'triage', action 'classify', field 'functon': unknown field; allowed fields are "
        "name, function, listen_to, config",
    ),
    "no actions": (
        _set(actions=[]),
        "agent 'triage', field 'actions': a plan needs at least one action",
    ),
    "unsupported plan version": (
        _set(plan_version=2),
        "agent 'triage', field 'plan_version': Input should be 1 (got 2)",
    ),
    "unknown resource type": (
        _set(resources=[{"name": "llm", "type": "llm", "provider": f"{ST}:classify"}]),
        "agent 'triage', resource 'llm', field 'type': Input should be 'chat_model', "
        "'chat_model_connection', 'embedding_model', 'embedding_model_connection', 'prompt', "
        "'tool', 'vector_store', 'mcp_server', 'skills' or 'custom' "
        "(got 'llm')",
    ),
    "unimportable resource provider": (
        _set(resources=[{"name": "llm", "type": "tool", "provider": "nowhere:make"}]),
        "agent 'triage', resource 'llm', field 'provider': "
        "cannot import 'nowhere:make': no module named 'nowhere'",
    ),
    "action name with a space": (
        _action(name="sort tickets"),
        "agent 'triage', action 'sort tickets', field 'name': 'sort tickets' is not a valid "
        "name: use letters, digits, '_' and '-'",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_invalid_plan_error_names_the_exact_place(tmp_path, case):
    mutate, expected = CASES[case]
    plan = copy.deepcopy(VALID)
    mutate(plan)
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    with pytest.raises(PlanError) as caught:
        load_plan(path)
    assert str(caught.value) == f"{path}: {expected}"


def test_the_valid_base_plan_loads(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(VALID))
    assert load_plan(path).name == "triage"


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("bad.yaml", "name: x\nactions:\n  - name: [\n",
         "invalid YAML at line 4, column 1: expected the node content, but found '<stream end>'"),
        ("bad.json", '{"name": "x",\n "actions": [}', "invalid JSON at line 2, column 14: "
         "Expecting value"),
        ("list.yaml", "- a\n- b\n", "a plan must be a mapping at the top level, got list"),
        ("plan.txt", "name: x\n", "unknown plan format: use .yaml, .yml or .json"),
    ],
)
def test_unparsable_plan_files(tmp_path, name, text, expected):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(PlanError) as caught:
        load_plan(path)
    assert str(caught.value) == f"{path}: {expected}"


def test_missing_file(tmp_path):
    with pytest.raises(PlanError, match=r"plan.yaml: cannot read plan: No such file"):
        load_plan(tmp_path / "plan.yaml")


def test_error_attributes_carry_the_place(tmp_path):
    plan = copy.deepcopy(VALID)
    _action(listen_to=["InputEvent", f"{ST}:TicketClosed"])(plan)
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    with pytest.raises(PlanError) as caught:
        load_plan(path)
    error = caught.value
    assert (error.file, error.agent, error.action, error.field) == (
        str(path), "triage", "classify", "listen_to[1]"
    )
