"""Lazily created, cached resources: one instance per runner (per Flink subtask)."""

from __future__ import annotations

import threading
from typing import Any

from flink_agents.api._errors import FlinkAgentsError
from flink_agents.api._resources import ResourceType
from flink_agents.plan import BoundPlan


class ResourceCache:
    """Creates each declared resource on first use, then hands out the same instance."""

    def __init__(self, plan: BoundPlan) -> None:
        self._plan = plan
        self._instances: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, name: str, type: ResourceType | None = None) -> Any:
        bound = self._plan.resources.get(name)
        if bound is None:
            declared = ", ".join(sorted(self._plan.resources)) or "none"
            raise FlinkAgentsError(
                f"agent '{self._plan.name}' has no resource named {name!r} (declared: {declared})"
            )
        if type is not None:
            try:
                wanted = ResourceType(type)
            except ValueError:
                kinds = ", ".join(t.value for t in ResourceType)
                raise FlinkAgentsError(
                    f"{type!r} is not a resource type (use one of {kinds})"
                ) from None
            if bound.spec.type != wanted:
                raise FlinkAgentsError(
                    f"resource {name!r} is a {bound.spec.type.value}, not a {wanted.value}"
                )
        with self._lock:
            if name not in self._instances:
                try:
                    self._instances[name] = bound.provider(**bound.spec.args)
                except Exception as error:
                    raise FlinkAgentsError(
                        f"creating resource {name!r} with {bound.spec.provider} failed: "
                        f"{type_name(error)}: {error}"
                    ) from error
            return self._instances[name]

    def created(self) -> list[str]:
        return list(self._instances)


def type_name(error: BaseException) -> str:
    return type(error).__name__
