"""Lazily created, cached resources: one instance per runner (per Flink subtask).

A resource that offers tools and prompts under their own names (an MCP server: ``ToolSet``,
``PromptSet``; skills: ``load_skill`` and ``read_skill_file``) makes them resources too: a
tool or prompt name that is not declared is looked up among the servers and skills the plan
declares (creating them), and must be offered by exactly one.
``close`` closes every created resource that has a ``close`` method (an MCP server's session).
A resource that uses others (a chat model naming its connection) has a ``bind_resources``
method: it is called once, on creation, with this cache's ``get``, for later lookups.

Environment references in a resource's args (``{"env": NAME}`` or ``"${env:NAME}"``, see
``flink_agents.api._resources``) are resolved here, at creation and nowhere else, so the
values never enter a plan; they are also masked in the creation error, should a provider
echo them.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

from flink_agents.api import (
    FlinkAgentsError,
    PromptSet,
    ResourceType,
    ToolSet,
    UnknownResourceError,
)
from flink_agents.api.internal import is_env_ref
from flink_agents.plan import BoundPlan

logger = logging.getLogger(__name__)

_ENV_IN_STRING = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_MASK = "***"
_OFFERING = (ResourceType.MCP_SERVER, ResourceType.SKILLS)
"""Resource types whose instances offer tools and prompts under their own names."""


class ResourceCache:
    """Creates each declared resource on first use, then hands out the same instance."""

    def __init__(self, plan: BoundPlan, environ: Mapping[str, str] | None = None) -> None:
        self._plan = plan
        self._environ = os.environ if environ is None else environ
        self._instances: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.on_created: Callable[[str, Any], None] | None = None
        """Called with each resource as it is created (the engine shares rate limits)."""

    def get(self, name: str, type: ResourceType | None = None) -> Any:
        wanted = None if type is None else _resource_type(type)
        bound = self._plan.resources.get(name)
        if bound is None:
            offered = self._offered(name, wanted)
            if offered is not None:
                return offered
            declared = ", ".join(sorted(self._plan.resources)) or "none"
            servers = self._offering()
            also = f"; nor offered by {', '.join(servers)}" if servers else ""
            raise UnknownResourceError(
                f"agent '{self._plan.name}' has no resource named {name!r} "
                f"(declared: {declared}{also})"
            )
        if wanted is not None and bound.spec.type != wanted:
            raise FlinkAgentsError(
                f"resource {name!r} is a {bound.spec.type.value}, not a {wanted.value}"
            )
        with self._lock:
            if name not in self._instances:
                secrets: list[str] = []
                args = resolve_env(name, bound.spec.args, self._environ, secrets)
                try:
                    instance = bound.provider(**args)
                except Exception as error:
                    detail = mask(f"{type_name(error)}: {error}", secrets)
                    raise FlinkAgentsError(
                        f"creating resource {name!r} with {bound.spec.provider} failed: {detail}"
                    ) from (None if secrets else error)
                if isinstance(instance, ToolSet | PromptSet):
                    instance.name = name  # it names itself by it in its errors
                bind = getattr(instance, "bind_resources", None)
                if callable(bind):  # it uses others: it gets them through us, when it needs
                    bind(self.get)
                if self.on_created is not None:
                    self.on_created(name, instance)
                self._instances[name] = instance
            return self._instances[name]

    def created(self) -> list[str]:
        return list(self._instances)

    def close(self) -> None:
        """Close every created resource that has a ``close`` method, newest first; a failure
        to close one is logged and the others are still closed."""
        with self._lock:
            instances = list(self._instances.items())
            self._instances.clear()
        for name, instance in reversed(instances):
            close = getattr(instance, "close", None)
            if not callable(close):
                continue
            try:
                close()
            except Exception as error:
                logger.warning("closing resource %r failed: %s: %s", name, type_name(error), error)

    def _offering(self) -> list[str]:
        """The declared resources that offer tools and prompts, in plan order."""
        return [n for n, b in self._plan.resources.items() if b.spec.type in _OFFERING]

    def _offered(self, name: str, wanted: ResourceType | None) -> Any:
        """The tool or prompt ``name`` that exactly one offering resource offers, or None;
        without a type, a tool before a prompt.

        Raises:
            FlinkAgentsError: more than one offers it.
            ToolUnavailableError: an offering resource cannot list what it offers.
        """
        if wanted is not None and wanted not in _OFFERED:
            return None
        sources = self._offering()
        for kind in [wanted] if wanted is not None else list(_OFFERED):  # tools first
            offered = [(s, _OFFERED[kind](self.get(s), name)) for s in sources]
            found = [(s, item) for s, item in offered if item is not None]
            if len(found) > 1:
                raise FlinkAgentsError(
                    f"{kind.value} {name!r} is offered by more than one resource of agent "
                    f"'{self._plan.name}': {', '.join(repr(s) for s, _ in found)}"
                )
            if found:
                return found[0][1]
        return None


def _offered_tool(instance: Any, name: str) -> Any:
    return instance.get_tool(name) if isinstance(instance, ToolSet) else None


def _offered_prompt(instance: Any, name: str) -> Any:
    return instance.get_prompt(name) if isinstance(instance, PromptSet) else None


_OFFERED = {ResourceType.TOOL: _offered_tool, ResourceType.PROMPT: _offered_prompt}
"""How to find a tool or a prompt that a resource offers."""


def _resource_type(type: Any) -> ResourceType:
    try:
        return ResourceType(type)
    except ValueError:
        kinds = ", ".join(t.value for t in ResourceType)
        raise FlinkAgentsError(f"{type!r} is not a resource type (use one of {kinds})") from None


def resolve_env(
    resource: str, value: Any, environ: Mapping[str, str], secrets: list[str], where: str = "args"
) -> Any:
    """``value`` with its environment references replaced; resolved values go to ``secrets``.

    Raises:
        FlinkAgentsError: naming the resource, the variable and the argument, when a
            referenced variable is not set.
    """
    if is_env_ref(value):
        return _lookup(resource, value["env"], environ, secrets, where)
    if isinstance(value, str):
        return _ENV_IN_STRING.sub(
            lambda m: _lookup(resource, m.group(1), environ, secrets, where), value
        )
    if isinstance(value, dict):
        return {
            k: resolve_env(resource, v, environ, secrets, f"{where}.{k}") for k, v in value.items()
        }
    if isinstance(value, list):
        return [
            resolve_env(resource, v, environ, secrets, f"{where}[{i}]") for i, v in enumerate(value)
        ]
    return value


def _lookup(
    resource: str, variable: str, environ: Mapping[str, str], secrets: list[str], where: str
) -> str:
    found = environ.get(variable)
    if found is None:
        raise FlinkAgentsError(
            f"resource {resource!r}: environment variable {variable} is not set "
            f"(it is referenced by {where})"
        )
    if len(found) >= 4:  # shorter values are not secrets, and masking them mangles text
        secrets.append(found)
    return found


def mask(text: str, secrets: list[str]) -> str:
    """``text`` with every resolved value replaced by ``***`` (longest first)."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, _MASK)
    return text


def type_name(error: BaseException) -> str:
    return type(error).__name__
