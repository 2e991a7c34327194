"""Plans: compiling agents, JSON/YAML round trips, and running a plan file in a new process."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from flink_agents.api import AgentsExecutionEnvironment, PlanError
from flink_agents.plan import (
    AgentPlan,
    compile_agent,
    load_plan,
    plan_from_json,
    plan_from_yaml,
    save_plan,
)
from tests.plan import agents

REPO = Path(__file__).resolve().parents[2]
PEOPLE = [{"name": "ada"}, {"name": "bob"}, {"name": "ada"}]


def test_compile_records_functions_events_resources_and_config():
    plan = compile_agent(agents.GreeterAgent)
    assert plan.name == "GreeterAgent"
    assert [(a.name, a.function, a.listen_to) for a in plan.actions] == [
        ("greet", "tests.plan.agents:GreeterAgent.greet", ("flink_agents.api:InputEvent",)),
        ("reply", "tests.plan.agents:GreeterAgent.reply", ("tests.plan.agents:Greeted",)),
    ]
    (suffix,) = plan.resources
    assert (suffix.name, suffix.type.value, suffix.provider, suffix.args) == (
        "suffix",
        "custom",
        "tests.plan.agents:GreeterAgent.suffix",
        {"mark": "!"},
    )
    assert plan.config == {"greeting": "hello"}


def test_json_and_yaml_round_trips_are_lossless():
    plan = compile_agent(agents.GreeterAgent)
    assert plan_from_json(plan.to_json()) == plan
    assert plan_from_yaml(plan.to_yaml()) == plan
    assert plan_from_yaml(plan_from_json(plan.to_json()).to_yaml()) == plan


def test_save_and_load_by_suffix(tmp_path):
    plan = compile_agent(agents.GreeterAgent)
    for name in ("agent.yaml", "agent.yml", "agent.json"):
        assert load_plan(save_plan(plan, tmp_path / name)) == plan


def test_plan_is_frozen():
    plan = compile_agent(agents.GreeterAgent)
    with pytest.raises(Exception, match="frozen"):
        plan.name = "other"  # type: ignore[misc]


def test_declarative_plan_from_plans_directory_loads_and_runs():
    plan = load_plan(REPO / "plans" / "support_triage.yaml")
    assert [a.name for a in plan.actions] == ["classify", "remember", "escalate"]
    tickets = [{"id": "T-1", "user": "u", "text": "I was charged twice, refund please"}]
    env = AgentsExecutionEnvironment.get_execution_environment()
    (output,) = env.from_list(tickets, "user").apply(plan).to_list()
    assert output["category"] == "billing" and output["route"] == "finance"


def test_short_event_names_and_full_references_mean_the_same():
    short = plan_from_yaml(
        "name: a\nactions:\n  - name: greet\n"
        "    function: tests.plan.agents:GreeterAgent.greet\n    listen_to: [InputEvent]\n"
    )
    assert short.actions[0].listen_to == ("flink_agents.api:InputEvent",)


def test_agent_defined_inside_a_function_is_rejected_with_a_reason():
    from flink_agents.api import Agent, InputEvent, action

    class LocalAgent(Agent):
        @action(InputEvent)
        @staticmethod
        def act(event, ctx):
            pass

    with pytest.raises(PlanError) as caught:
        compile_agent(LocalAgent)
    assert str(caught.value) == (
        "agent 'LocalAgent', action 'act', field 'function': "
        "tests.plan.test_plan_files:test_agent_defined_inside_a_function_is_rejected_with_a_reason"
        ".<locals>.LocalAgent.act is defined inside a function; plans refer to code by "
        "module:qualname, so define it at module level"
    )


def test_compile_rejects_wrong_signature_and_empty_agents():
    with pytest.raises(PlanError) as caught:
        compile_agent(agents.WrongSignatureAgent)
    assert str(caught.value) == (
        "agent 'WrongSignatureAgent', action 'greet', field 'function': an action takes "
        "(event, ctx), but 'tests.plan.agents:WrongSignatureAgent.greet' has signature "
        "(event: flink_agents.api.InputEvent) -> None"
    )
    with pytest.raises(PlanError, match="agent 'NoActionsAgent': has no actions"):
        compile_agent(agents.NoActionsAgent)


def _run_in_fresh_process(plan_file: Path, tmp_path: Path) -> list:
    data = tmp_path / "people.jsonl"
    data.write_text("".join(json.dumps(p) + "\n" for p in PEOPLE))
    out = tmp_path / "out.jsonl"
    subprocess.run(
        [sys.executable, "-m", "flink_agents", "run", str(plan_file), str(data), "--key", "name",
         "--output", str(out)],
        check=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_plan_file_runs_in_a_fresh_process_like_in_this_one(tmp_path, suffix):
    plan = compile_agent(agents.GreeterAgent)
    plan_file = save_plan(plan, tmp_path / f"greeter{suffix}")
    env = AgentsExecutionEnvironment.get_execution_environment()
    here = env.from_list(PEOPLE, "name").apply(plan).to_list()
    assert here == ["hello ada! #1", "hello bob! #1", "hello ada! #2"]
    assert _run_in_fresh_process(plan_file, tmp_path) == here


def test_plan_model_can_be_built_in_code():
    plan = AgentPlan(
        name="built",
        actions=[
            {"name": "greet", "function": "tests.plan.agents:GreeterAgent.greet",
             "listen_to": ["InputEvent"]}
        ],
    )
    assert plan.actions[0].listen_to == ("flink_agents.api:InputEvent",)
