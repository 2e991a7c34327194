"""Decorators as Apache Flink Agents names them (``flink_agents.api.decorators``).

``@action`` takes event classes, or (their 0.3 and later) event type strings. The resource
decorators mark a static method that *returns* what to create (a ``ResourceDescriptor``, a
``Prompt``, ...); the method is called in the runner that creates the resource, so what it
reads there (an API key from the environment) never enters the plan. ``@tool`` marks a
static method that *is* the tool.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flink_agents.api._agent import ACTION_ATTR, RESOURCE_ATTR
from flink_agents.api._events import Event
from flink_agents.api._resources import ResourceType
from flink_agents.api._tools import tool as _tool
from flink_agents.api.events.event import typed_event_class

DECLARED_RESOURCE = "flink_agents.migration:declared_resource"
"""The provider a plan names for a decorated declaration: it calls the declaration."""


def _function_of(member: Any) -> Any:
    return member.__func__ if isinstance(member, staticmethod) else member


def action(*listen_events: type[Event] | str) -> Callable[[Any], Any]:
    """Mark a static method ``(event, ctx)`` as an action triggered by these events: event
    classes, or event type strings (``Event(type=...)``; a class's ``EVENT_TYPE``)."""
    if not listen_events:
        raise AssertionError("action must have at least one event type to listen to")
    classes: list[type[Event]] = []
    for listened in listen_events:
        if isinstance(listened, str):
            classes.append(typed_event_class(listened))
        elif isinstance(listened, type) and issubclass(listened, Event):
            classes.append(listened)
        else:
            raise AssertionError("action must only listen to event types.")

    def decorate(member: Any) -> Any:
        function = _function_of(member)
        setattr(function, ACTION_ATTR, tuple(classes))
        function._listen_events = listen_events
        return member

    return decorate


def _declaration(kind: ResourceType, marker: str) -> Callable[[Any], Any]:
    def decorate(member: Any) -> Any:
        function = _function_of(member)
        setattr(function, RESOURCE_ATTR, (kind, {}, DECLARED_RESOURCE))
        setattr(function, marker, True)
        return member

    decorate.__name__ = marker.removeprefix("_is_")
    decorate.__doc__ = (
        f"Mark a static method returning a {kind.value} resource (a ``ResourceDescriptor`` "
        "or the resource itself) as its declaration, named after the method."
    )
    return decorate


chat_model_connection = _declaration(
    ResourceType.CHAT_MODEL_CONNECTION, "_is_chat_model_connection"
)
chat_model_setup = _declaration(ResourceType.CHAT_MODEL, "_is_chat_model_setup")
embedding_model_connection = _declaration(
    ResourceType.EMBEDDING_MODEL_CONNECTION, "_is_embedding_model_connection"
)
embedding_model_setup = _declaration(ResourceType.EMBEDDING_MODEL, "_is_embedding_model_setup")
prompt = _declaration(ResourceType.PROMPT, "_is_prompt")
vector_store = _declaration(ResourceType.VECTOR_STORE, "_is_vector_store")
mcp_server = _declaration(ResourceType.MCP_SERVER, "_is_mcp_server")
skills = _declaration(ResourceType.SKILLS, "_is_skills")


def tool(func: Any) -> Any:
    """Mark a static method as a tool named after it (its docstring describes it)."""
    _function_of(func)._is_tool = True
    return _tool(func)


def java_resource(cls: type) -> type:
    """Mark a class as a Java resource. Java resources cannot run here: declaring one fails
    when the plan is built (``docs/migrating.md``)."""
    cls._is_java_resource = True
    return cls


__all__ = [
    "action",
    "chat_model_connection",
    "chat_model_setup",
    "embedding_model_connection",
    "embedding_model_setup",
    "java_resource",
    "mcp_server",
    "prompt",
    "skills",
    "tool",
    "vector_store",
]
