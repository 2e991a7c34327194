"""The agent plan: a serializable description of an agent, and how to make and load one."""

from pathlib import Path
from typing import Any

from flink_agents.api import Agent, PlanError
from flink_agents.plan._bind import BoundAction, BoundPlan, BoundResource, bind_plan
from flink_agents.plan._compile import agent_plan_data, compile_agent
from flink_agents.plan._load import (
    load_plan,
    plan_from_json,
    plan_from_yaml,
    save_plan,
    validate_plan_data,
)
from flink_agents.plan._model import ActionSpec, AgentPlan, ResourceSpec


def to_plan(agent: Any) -> AgentPlan:
    """An ``AgentPlan`` from whatever users pass to ``apply``: an ``Agent`` class or
    instance, a plan, or the path of a plan file."""
    if isinstance(agent, AgentPlan):
        return agent
    if isinstance(agent, (str, Path)):
        return load_plan(agent)
    if isinstance(agent, Agent) or (isinstance(agent, type) and issubclass(agent, Agent)):
        return compile_agent(agent)
    raise PlanError(
        f"cannot run {agent!r}: pass an Agent class or instance, an AgentPlan or a plan file path"
    )


__all__ = [
    "ActionSpec",
    "AgentPlan",
    "BoundAction",
    "BoundPlan",
    "BoundResource",
    "ResourceSpec",
    "agent_plan_data",
    "bind_plan",
    "compile_agent",
    "load_plan",
    "plan_from_json",
    "plan_from_yaml",
    "save_plan",
    "to_plan",
    "validate_plan_data",
]
