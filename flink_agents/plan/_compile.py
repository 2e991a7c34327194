"""Compiling a Python ``Agent`` class into an ``AgentPlan``."""

from __future__ import annotations

from typing import Any

from flink_agents.api import Agent, Event, PlanError, ResourceType, Tool
from flink_agents.api.internal import ACTION_ATTR, RESOURCE_ATTR, TOOL_ATTR
from flink_agents.plan._bind import bind_plan
from flink_agents.plan._load import validate_plan_data
from flink_agents.plan._model import BUILTIN_EVENT_TYPES, AgentPlan
from flink_agents.plan._refs import RefError, import_ref, ref_of

_BUILTIN_REFS = {import_ref(ref): ref for ref in BUILTIN_EVENT_TYPES.values()}
_TOOL_PROVIDER = ref_of(Tool.from_ref)


def compile_agent(agent: type[Agent] | Agent) -> AgentPlan:
    """The plan of an ``Agent`` class (or instance), checked by binding it.

    An instance configured in code (``ReActAgent(...)``) provides its own ``to_plan()``.

    Raises:
        PlanError: no actions, an action defined inside a function, a wrong signature, ...
    """
    if not isinstance(agent, type) and callable(getattr(agent, "to_plan", None)):
        return agent.to_plan()
    cls = agent if isinstance(agent, type) else type(agent)
    if not issubclass(cls, Agent):
        raise PlanError(f"{cls.__qualname__} is not a subclass of flink_agents.api.Agent")
    data = agent_plan_data(cls)
    if not data["actions"]:
        raise PlanError(
            "has no actions: decorate static methods with @action(EventType)", agent=data["name"]
        )
    plan = validate_plan_data(data)
    bind_plan(plan)
    return plan


def agent_plan_data(cls: type[Agent]) -> dict[str, Any]:
    """The plan data (unchecked) of what an ``Agent`` class declares: its ``@action``s, its
    ``@resource``s and ``@tool``s, its name and config. A class that adds more in code (a
    ``ReActAgent``, an agent written for Apache Flink Agents) starts from this.

    A resource marker may name a provider of its own (``RESOURCE_ATTR`` as ``(type, args,
    provider)``): the plan then calls that provider with the marked function's reference as
    ``declaration``, for declarations that return what to create rather than create it.
    """
    name = cls.name or cls.__name__
    members: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        members.update(vars(klass))
    actions, resources = [], []
    for attr, member in members.items():
        function = member.__func__ if isinstance(member, staticmethod) else member
        listen_to = getattr(function, ACTION_ATTR, None)
        declared = getattr(function, RESOURCE_ATTR, None)
        if listen_to is not None:
            ref = _ref(function, name, action=attr)
            events = [_event_ref(t, name, attr) for t in listen_to]
            actions.append({"name": attr, "function": ref, "listen_to": events})
        elif declared is not None:
            resource_type, args, *provider = declared
            ref = _ref(function, name, resource=attr)
            if provider and provider[0] is not None:
                own = provider[0]
                own = own if isinstance(own, str) else _ref(own, name, resource=attr)
                args, ref = {**args, "declaration": ref}, own
            resources.append(
                {"name": attr, "type": resource_type.value, "provider": ref, "args": args}
            )
        elif getattr(function, TOOL_ATTR, None) is not None:  # @tool: the method is the tool
            ref = _ref(function, name, resource=attr)
            resources.append(
                {
                    "name": attr,
                    "type": ResourceType.TOOL.value,
                    "provider": _TOOL_PROVIDER,
                    "args": {"function": ref},
                }
            )
    return {
        "name": name,
        "actions": actions,
        "resources": resources,
        "config": dict(cls.config),
    }


def _ref(function: Any, agent: str, **place: str) -> str:
    try:
        return ref_of(function)
    except RefError as error:
        field = "function" if "action" in place else "provider"
        raise PlanError(str(error), agent=agent, field=field, **place) from None


def _event_ref(event_type: type[Event], agent: str, action: str) -> str:
    if event_type in _BUILTIN_REFS:
        return _BUILTIN_REFS[event_type]
    try:
        return ref_of(event_type)
    except RefError as error:
        raise PlanError(str(error), agent=agent, action=action, field="listen_to") from None
