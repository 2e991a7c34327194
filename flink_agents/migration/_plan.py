"""Plans of agents written for Apache Flink Agents: their decorators mark what ours do, and
what an ``Agent`` instance or an environment adds in code is written into the plan here."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from flink_agents.api import (
    FlinkAgentsError,
    PlanError,
    ResourceDescriptor,
    ResourceType,
    Tool,
    env_ref,
)
from flink_agents.api.decorators import DECLARED_RESOURCE
from flink_agents.api.internal import RefError, import_ref, is_env_ref, ref_of
from flink_agents.migration._resources import check_class
from flink_agents.plan import AgentPlan, agent_plan_data, bind_plan, to_plan, validate_plan_data

SECRET_ARGUMENTS = ("api_key", "token", "password", "secret", "authorization", "credential")
"""What an argument's name holds (case aside) when its literal value never goes into a plan."""
MIN_SECRET_CHARS = 8
"""The shortest environment value looked for inside a secret's text (shorter ones would be
found by chance)."""


def plan_of(agent: Any) -> AgentPlan:
    """The plan of an agent of Apache Flink Agents' kind (``flink_agents.api.agents.agent``
    ``Agent``): its class's declarations and the actions and resources its instance was
    given (``extend_plan``)."""
    return extend_plan(agent_plan_data(type(agent)), agent)


def extend_plan(data: dict[str, Any], agent: Any) -> AgentPlan:
    """``data`` (a plan's, unchecked) with the actions and resources ``agent`` was given in
    code (``add_action``, ``add_resource``; a resource it already declares wins), checked.

    Declarations are called once here to check what they name (a Java class or a provider
    we do not carry fails now, in the client), and again in the runner that creates them.

    Raises:
        PlanError: no actions, an action or resource that cannot be written into a plan.
    """
    name = data["name"]
    for action_name, (events, function, config) in getattr(agent, "_actions", {}).items():
        data["actions"].append(_action(name, action_name, events, function, config))
    _add_shared(data, getattr(agent, "_resources", {}))
    if not data["actions"]:
        raise PlanError("has no actions: decorate static methods with @action(...)", agent=name)
    for resource in data["resources"]:
        if resource["provider"] == DECLARED_RESOURCE:
            _check_declaration(name, resource)
    plan = validate_plan_data(data)
    bind_plan(plan)
    return plan


def with_shared(agent: Any, shared: Mapping[ResourceType, Mapping[str, Any]]) -> AgentPlan:
    """The plan of any agent ``apply`` takes, with an environment's resources added for the
    names it does not declare (Apache Flink Agents' ``add_resource`` on an environment)."""
    plan = to_plan(agent)
    if not any(shared.values()):
        return plan
    data = plan.model_dump(mode="json")
    _add_shared(data, shared)
    merged = validate_plan_data(data)
    bind_plan(merged)
    return merged


def _add_shared(
    data: dict[str, Any], shared: Mapping[ResourceType, Mapping[str, Any]] | None
) -> None:
    """Add ``shared`` resources to ``data`` under the names it does not declare; one it
    declares as another type is refused (a plan holds one resource per name).

    Raises:
        PlanError: a name declared with two types.
    """
    declared = {r["name"]: r["type"] for r in data["resources"]}
    for kind, resources in (shared or {}).items():
        for resource_name, instance in resources.items():
            if resource_name not in declared:
                data["resources"].append(_resource(data["name"], resource_name, kind, instance))
                declared[resource_name] = ResourceType(kind).value
            elif declared[resource_name] != ResourceType(kind).value:
                raise PlanError(
                    f"is declared as a {declared[resource_name]} and added as a "
                    f"{ResourceType(kind).value}: give the resources different names",
                    agent=data["name"],
                    resource=resource_name,
                )


def _action(
    agent: str, name: str, events: Iterable[Any], function: Any, config: Mapping | None
) -> dict[str, Any]:
    from flink_agents.api.events.event import typed_event_class

    function = getattr(function, "__func__", function)
    try:
        ref = ref_of(function)
        listen_to = [ref_of(typed_event_class(e) if isinstance(e, str) else e) for e in events]
    except RefError as error:
        raise PlanError(str(error), agent=agent, action=name) from None
    return {"name": name, "function": ref, "listen_to": listen_to, "config": dict(config or {})}


def _resource(agent: str, name: str, kind: ResourceType, instance: Any) -> dict[str, Any]:
    kind = ResourceType(kind)
    function_tool = kind is ResourceType.TOOL and callable(instance)
    if function_tool and not isinstance(instance, Tool | ResourceDescriptor):
        instance = Tool.from_function(instance)
    describe = getattr(instance, "descriptor", None)
    descriptor = describe() if callable(describe) else instance
    if not isinstance(descriptor, ResourceDescriptor):
        raise PlanError(
            f"cannot write {type(instance).__name__} into a plan: add a ResourceDescriptor, "
            "a Prompt, a Tool or a chat model of ours",
            agent=agent,
            resource=name,
        )
    args = _without_secrets(agent, name, dict(descriptor.args))
    clazz = args.get("clazz")
    if isinstance(clazz, str):
        try:
            check_class(clazz)
        except FlinkAgentsError as error:
            raise PlanError(str(error), agent=agent, resource=name) from None
    return {"name": name, "type": kind.value, "provider": descriptor.provider, "args": args}


def _without_secrets(agent: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` with each secret given by value (``api_key=os.environ["OPENAI_API_KEY"]``,
    a header ``"Bearer " + key``) written as a reference to the environment variable that
    holds it, which the runner resolves where it runs; a secret no variable holds cannot go
    into a plan.

    Raises:
        PlanError: a secret that no environment variable holds.
    """
    for key, value in args.items():
        if isinstance(value, dict) and not is_env_ref(value):
            args[key] = _without_secrets(agent, name, dict(value))
            continue
        spelled = key.lower().replace("-", "_")  # a header's name too: X-API-Key
        secret = any(word in spelled for word in SECRET_ARGUMENTS)
        if not (secret and isinstance(value, str) and value) or "${env:" in value:
            continue
        referenced = _referenced(value)
        if referenced is None:
            raise PlanError(
                f"argument {key!r} would write a secret into the plan: set it in an "
                f'environment variable and give {{"env": "VARIABLE"}} (or '
                f"os.environ[...], which is found), or declare the resource with a "
                "decorated method (it runs in the runner)",
                agent=agent,
                resource=name,
            )
        args[key] = referenced
    return args


def _referenced(value: str) -> Any:
    """``value`` as a reference to the environment: ``{"env": NAME}`` when a variable holds
    it, the text with ``${env:NAME}`` for a variable's value within it; None if neither."""
    variables = sorted(
        ((k, v) for k, v in os.environ.items() if len(v) >= MIN_SECRET_CHARS),
        key=lambda item: -len(item[1]),
    )
    for variable, held in variables:
        if held == value:
            return env_ref(variable)
    for variable, held in variables:
        if held in value:
            return value.replace(held, f"${{env:{variable}}}")
    return None


def _check_declaration(agent: str, resource: dict[str, Any]) -> None:
    function = import_ref(resource["args"]["declaration"])
    try:
        declared = function()
    except Exception as error:
        raise PlanError(
            f"its declaration failed: {type(error).__name__}: {error}",
            agent=agent,
            resource=resource["name"],
        ) from None
    clazz = (
        getattr(declared, "args", {}).get("clazz")
        if isinstance(declared, ResourceDescriptor)
        else None
    )
    if isinstance(clazz, str):
        try:
            check_class(clazz)
        except FlinkAgentsError as error:
            raise PlanError(str(error), agent=agent, resource=resource["name"]) from None
    if getattr(declared, "_is_java_resource", False) or getattr(
        type(declared), "_is_java_resource", False
    ):
        raise PlanError(
            "is a Java resource: Java resources need Apache Flink Agents' Java runtime "
            "(docs/migrating.md)",
            agent=agent,
            resource=resource["name"],
        )
