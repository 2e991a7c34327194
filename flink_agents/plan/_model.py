"""The agent plan: plain, frozen pydantic data that every runner executes.

A plan names code only as ``module:qualname`` strings, so it can be written to a file and
run in another process (a Flink worker) without the classes that produced it.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from flink_agents.api import ResourceType

REF_PATTERN = r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$"
NAME_PATTERN = r"^[A-Za-z_][\w\-]*$"

# Short names accepted in plans for the built-in event types.
BUILTIN_EVENT_TYPES = {
    "Event": "flink_agents.api:Event",
    "InputEvent": "flink_agents.api:InputEvent",
    "OutputEvent": "flink_agents.api:OutputEvent",
}

CodeRef = str  # "package.module:Qualified.name"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ActionSpec(_Frozen):
    """One action: the function to call and the event types that trigger it."""

    name: str = Field(pattern=NAME_PATTERN)
    function: CodeRef = Field(pattern=REF_PATTERN)
    listen_to: tuple[str, ...] = Field(min_length=1)
    config: dict[str, Any] = Field(default_factory=dict)

    @field_validator("listen_to")
    @classmethod
    def _canonical_event_types(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        canonical = []
        for i, name in enumerate(value):
            name = BUILTIN_EVENT_TYPES.get(name, name)
            if not re.match(REF_PATTERN, name):
                raise ValueError(
                    f"listen_to[{i}] = {name!r} is not an event type: use module:ClassName "
                    f"or one of {sorted(BUILTIN_EVENT_TYPES)}"
                )
            canonical.append(name)
        return tuple(canonical)


class ResourceSpec(_Frozen):
    """One resource: a provider called lazily with ``args`` to create it."""

    name: str = Field(pattern=NAME_PATTERN)
    type: ResourceType
    provider: CodeRef = Field(pattern=REF_PATTERN)
    args: dict[str, Any] = Field(default_factory=dict)


class AgentPlan(_Frozen):
    """A complete, serializable description of an agent."""

    plan_version: Literal[1] = 1
    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    actions: tuple[ActionSpec, ...] = Field(min_length=1)
    resources: tuple[ResourceSpec, ...] = ()
    config: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _unique_names(self) -> AgentPlan:
        for kind, items in (("action", self.actions), ("resource", self.resources)):
            seen: set[str] = set()
            for item in items:
                if item.name in seen:
                    raise PydanticCustomError(
                        "duplicate_name",
                        "duplicate {kind} name {name!r}",
                        {"kind": kind, "name": item.name},
                    )
                seen.add(item.name)
        return self

    def action(self, name: str) -> ActionSpec:
        return next(a for a in self.actions if a.name == name)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    def to_yaml(self) -> str:
        import yaml  # here: only the client writes YAML (see ``plan_from_yaml``)

        return yaml.safe_dump(
            json.loads(self.model_dump_json()), sort_keys=False, allow_unicode=True
        )
