"""Resources: named things actions use (models, tools, prompts, stores), created lazily.

A plan declares each resource as a provider (``module:qualname``) and JSON ``args``. Plans
are written to files and shipped to workers, so secrets never go into ``args``: write an
environment-variable reference instead, resolved only when the runner creates the resource:

- ``{"env": "OPENAI_API_KEY"}``: the whole value is the variable's value;
- ``"${env:OPENAI_API_KEY}"``: substituted inside a string (``"Bearer ${env:TOKEN}"``).

An unset variable fails the creation with an error naming the resource and the variable.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from flink_agents.api._errors import FlinkAgentsError
from flink_agents.api._refs import ref_of


class ResourceType(StrEnum):
    """The kind of a resource; ``ctx.get_resource(name, type)`` checks it."""

    CHAT_MODEL = "chat_model"
    CHAT_MODEL_CONNECTION = "chat_model_connection"
    """Where and how to reach a model provider; chat models of the kind Apache Flink Agents
    calls a setup name one (``docs/migrating.md``)."""
    EMBEDDING_MODEL = "embedding_model"
    EMBEDDING_MODEL_CONNECTION = "embedding_model_connection"
    PROMPT = "prompt"
    TOOL = "tool"
    VECTOR_STORE = "vector_store"
    MCP_SERVER = "mcp_server"
    """Offers tools and prompts under their own names (``ToolSet``, ``PromptSet``)."""
    SKILLS = "skills"
    """Agent skills (``Skills``); offers the tools that read them, under their own names."""
    CUSTOM = "custom"


class UnknownResourceError(FlinkAgentsError, KeyError):
    """No resource of that name is declared in the plan (a ``KeyError``, as Apache Flink
    Agents' agents expect)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def env_ref(variable: str) -> dict[str, str]:
    """The plan-safe stand-in for a secret: ``{"env": variable}``."""
    return {"env": variable}


def is_env_ref(value: Any) -> bool:
    """Whether ``value`` is the ``{"env": NAME}`` form (a dict with the single key ``env``)."""
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("env"), str)


class ResourceDescriptor:
    """How to create a resource, as it will be written into a plan: provider and args.

    Objects configured in code (a chat model, a tool, a prompt) describe themselves with one
    of these so that an agent built from instances (``ReActAgent(chat_model=...)``) can be
    turned into a plan that another process recreates.

    Args:
        provider: a module-level callable, or its ``"module:qualname"``.
        type: the resource type to declare.
        args: JSON-serializable keyword arguments of the provider; secrets as ``env_ref``.
    """

    def __init__(
        self, provider: Callable[..., Any] | str, type: ResourceType, /, **args: Any
    ) -> None:
        self.provider = provider if isinstance(provider, str) else ref_of(provider)
        self.type = ResourceType(type)
        self.args = args

    def __repr__(self) -> str:
        return f"ResourceDescriptor({self.provider!r}, {self.type.value!r}, {self.args!r})"


@runtime_checkable
class Describable(Protocol):
    """An object that can say how to recreate itself as a declared resource."""

    def descriptor(self) -> ResourceDescriptor: ...
