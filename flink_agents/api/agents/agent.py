"""``Agent`` as Apache Flink Agents defines it (``flink_agents.api.agents.agent``).

A subclass of our ``Agent``: declared with the decorators of ``flink_agents.api.decorators``
(or ours), and an instance can also be given actions and resources in code
(``add_action``, ``add_resource``). ``apply`` turns it into a plan like any agent of ours.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from flink_agents.api._agent import Agent as _Agent
from flink_agents.api._events import Event
from flink_agents.api._resources import ResourceType

STRUCTURED_OUTPUT = "structured_output"
"""The key of a chat response message's ``extra_args`` that holds the structured output
(also on ``ChatResponseEvent.structured_output``)."""


class Agent(_Agent):
    """An agent of Apache Flink Agents' kind: declared by decorators, or built in code."""

    def __init__(self) -> None:
        self._actions: dict[str, tuple[list[type[Event]], Callable[..., Any], dict | None]] = {}
        self._resources: dict[ResourceType, dict[str, Any]] = {kind: {} for kind in ResourceType}

    @property
    def actions(self) -> dict[str, tuple[list[type[Event]], Callable[..., Any], dict | None]]:
        """The actions added in code, by name: ``(events, function, config)``."""
        return self._actions

    @property
    def resources(self) -> dict[ResourceType, dict[str, Any]]:
        """The resources added in code, by type and name."""
        return self._resources

    def add_action(
        self, name: str, events: list[type[Event]], func: Callable[..., Any], **config: Any
    ) -> Agent:
        """Add the action ``name``: ``func(event, ctx)`` (a module-level function or static
        method) triggered by ``events``; ``config`` is what ``ctx.action_config`` reads."""
        if name in self._actions:
            raise ValueError(f"Action {name} already defined")
        self._actions[name] = (list(events), func, config or None)
        return self

    def add_resource(self, name: str, resource_type: ResourceType, instance: Any) -> Agent:
        """Add the resource ``name``: a ``ResourceDescriptor``, or an object that describes
        itself (a ``Prompt``, a ``Tool``, a chat model of ours)."""
        kind = ResourceType(resource_type)
        if name in self._resources[kind]:
            raise ValueError(f"{kind.value} {name} already defined")
        self._resources[kind][name] = instance
        return self

    def to_plan(self) -> Any:
        """The ``AgentPlan`` of this agent: its class's declarations and what was added."""
        return importlib.import_module("flink_agents.migration").plan_of(self)


__all__ = ["STRUCTURED_OUTPUT", "Agent"]
