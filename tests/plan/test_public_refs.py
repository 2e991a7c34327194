"""Plans name our code through public packages: what this release writes into a plan names no
private module of flink_agents, and plans written before, which do, still load the same."""

import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

from flink_agents.agents import ReActAgent, chat_model_action, tool_call_action
from flink_agents.api import (
    ChatResponseEvent,
    Prompt,
    SubAgent,
    Tool,
)
from flink_agents.api.internal import import_ref, ref_of
from flink_agents.examples.react_tools import Calculation, add
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.integrations.mcp import MCPServer
from flink_agents.plan import AgentPlan, bind_plan, load_plan, plan_from_yaml
from flink_agents.plan._bind import BUILTIN_ACTIONS
from flink_agents.plan._load import _checked

REPO = Path(__file__).resolve().parents[2]
PRIVATE = re.compile(r"(^|\.)_[^_.][^.:]*")  # a private part of a module path


def _public_packages() -> list[str]:
    root = REPO / "flink_agents"
    packages = [
        ".".join(("flink_agents", *init.parent.relative_to(root).parts))
        for init in root.rglob("__init__.py")
    ]
    return sorted(p for p in packages if not PRIVATE.search(p) and "data" not in p.split("."))


def _refs(plan: AgentPlan) -> list[str]:
    """Every reference to code in ``plan``, including those in resource arguments."""
    refs = [a.function for a in plan.actions] + [t for a in plan.actions for t in a.listen_to]
    refs += [r.provider for r in plan.resources]
    refs += [
        value
        for r in plan.resources
        for value in r.args.values()
        if isinstance(value, str) and value.startswith("flink_agents.") and ":" in value
    ]
    return refs


def _private(refs: list[str]) -> list[str]:
    return [ref for ref in refs if PRIVATE.search(ref.partition(":")[0])]


@pytest.mark.parametrize("package", _public_packages())
def test_what_a_package_exports_is_named_through_that_package(package):
    module = importlib.import_module(package)
    for name in getattr(module, "__all__", ()):
        value = getattr(module, name)
        if not (isinstance(value, type) or callable(value)) or isinstance(value, ModuleType):
            continue  # (flink_agents.api.resource: once imported, its module, callable)
        if not getattr(value, "__module__", "").startswith("flink_agents."):
            continue
        if value.__module__.startswith("flink_agents._"):
            continue  # shared by every package (ids, shipping), never named by a plan
        ref = ref_of(value)
        assert not _private([ref]), f"{package}.{name} is written as {ref}"
        assert import_ref(ref) is value


def test_a_method_of_an_exported_class_is_named_through_the_class():
    assert ref_of(Tool.from_ref) == "flink_agents.api:Tool.from_ref"
    assert ref_of(Prompt.from_text) == "flink_agents.api:Prompt.from_text"
    assert ref_of(ReActAgent.finish) == "flink_agents.agents:ReActAgent.finish"


def test_what_no_public_package_exports_keeps_its_module():
    assert ref_of(_checked) == "flink_agents.plan._load:_checked"
    assert ref_of(Calculation) == "flink_agents.examples.react_tools:Calculation"


def test_the_built_in_actions_are_named_through_public_packages():
    refs = [ref for spec in BUILTIN_ACTIONS for ref in (spec.function, *spec.listen_to)]
    assert _private(refs) == []
    assert [import_ref(spec.function) for spec in BUILTIN_ACTIONS][:2] == [
        chat_model_action,
        tool_call_action,
    ]


def test_a_configured_react_agent_writes_a_plan_of_public_references(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    agent = ReActAgent(
        chat_model=OpenAIChatModel(model="m", base_url="http://127.0.0.1:9"),
        tools={
            "add": add,
            "helper": SubAgent(ReActAgent, description="another agent"),
            "calendar": MCPServer("calendar-server"),
        },
        prompt="Solve: {input}",
        output_schema=Calculation,
    )
    plan = agent.to_plan()
    refs = _refs(plan)
    assert "flink_agents.agents:ReActAgent.finish" in refs
    assert "flink_agents.api:Tool.from_ref" in refs
    assert "flink_agents.api:SubAgent" in refs
    assert "flink_agents.agents:ReActAgent" in refs  # the sub-agent, in the resource's args
    assert _private(refs) == []


@pytest.mark.parametrize("path", sorted((REPO / "plans").glob("*.yaml")), ids=lambda p: p.name)
def test_the_example_plans_name_public_modules_only(path):
    assert _private(_refs(load_plan(path))) == []


# Written by releases before public references (plans/react_example.yaml among them): the
# built-in chat action under another name, events and providers through private modules.
OLD_PLAN = """
name: written_before
actions:
  - name: chat
    function: flink_agents.agents._builtin:chat_model_action
    listen_to: [flink_agents.api._chat:ChatRequestEvent, flink_agents.api._tools:ToolResponseEvent]
  - name: finish
    function: flink_agents.agents._react:ReActAgent.finish
    listen_to: [flink_agents.api._chat:ChatResponseEvent]
resources:
  - name: add
    type: tool
    provider: flink_agents.api._tools:Tool.from_ref
    args: {function: "flink_agents.examples.react_tools:add"}
  - name: question
    type: prompt
    provider: flink_agents.api._prompts:Prompt.from_text
    args: {text: "Solve: {input}"}
"""


def test_a_plan_naming_private_modules_binds_the_same_objects():
    bound = bind_plan(plan_from_yaml(OLD_PLAN))
    assert [(a.name, a.function) for a in bound.actions[:3]] == [
        ("chat", chat_model_action),
        ("finish", ReActAgent.finish),
        ("tool_call_action", tool_call_action),
    ]
    assert bound.actions[1].listen_to == (ChatResponseEvent,)
    assert bound.resources["add"].provider == Tool.from_ref
    assert bound.resources["question"].provider == Prompt.from_text


def test_a_built_in_named_by_either_path_replaces_the_built_in_once():
    for function in ("flink_agents.agents._builtin", "flink_agents.agents"):
        plan = plan_from_yaml(
            f"name: mine\nactions:\n  - name: chat\n    function: {function}:chat_model_action\n"
            "    listen_to: [flink_agents.api:ChatRequestEvent]\n"
        )
        functions = [a.function for a in bind_plan(plan).actions]
        assert functions.count(chat_model_action) == 1, function
        assert tool_call_action in functions
