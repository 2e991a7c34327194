"""The ``Agent`` base class and the decorators that declare its actions and resources."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from flink_agents.api._events import Event
from flink_agents.api._resources import ResourceType

F = TypeVar("F")

ACTION_ATTR = "__flink_agents_listen_to__"
RESOURCE_ATTR = "__flink_agents_resource__"


def _function_of(member: Any) -> Any:
    return member.__func__ if isinstance(member, staticmethod) else member


def action(*listen_to: type[Event]) -> Callable[[F], F]:
    """Declare a static method ``(event, ctx)`` as an action triggered by these event types.

    Works above or below ``@staticmethod``. An action listening to a base class also fires
    for its subclasses. The function may be ``async def``.
    """
    if not listen_to:
        raise TypeError("@action needs at least one event type, e.g. @action(InputEvent)")
    for event_type in listen_to:
        if not (isinstance(event_type, type) and issubclass(event_type, Event)):
            raise TypeError(f"@action takes Event subclasses, got {event_type!r}")

    def decorate(member: F) -> F:
        setattr(_function_of(member), ACTION_ATTR, tuple(listen_to))
        return member

    return decorate


def resource(type: ResourceType, **args: Any) -> Callable[[F], F]:
    """Declare a static method as the provider of a resource named after it.

    The provider is called once per runner (per Flink subtask), lazily, with ``args``;
    ``args`` must be JSON-serializable since they are written into the plan.
    """

    def decorate(member: F) -> F:
        setattr(_function_of(member), RESOURCE_ATTR, (ResourceType(type), dict(args)))
        return member

    return decorate


class Agent:
    """Base class of agents written in Python.

    Actions are static methods decorated with ``@action``; resources are static methods
    decorated with ``@resource``. An agent is compiled into an ``AgentPlan`` before it runs,
    so define it at module level: the plan refers to its functions as ``module:qualname``.

    Attributes:
        name: the agent's name in its plan; defaults to the class name.
        config: agent options, readable by actions as ``ctx.config``.
    """

    name: ClassVar[str | None] = None
    config: ClassVar[dict[str, Any]] = {}
