"""Binding a plan: importing its functions and event types, checked, indexed for dispatch."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flink_agents.api import Event, OutputEvent, PlanError
from flink_agents.plan._model import ActionSpec, AgentPlan, ResourceSpec
from flink_agents.plan._refs import RefError, import_ref

# Built-in actions bound into every plan, so agents send ChatRequestEvent / ToolRequestEvent /
# ContextRetrievalRequestEvent without declaring the plumbing (seed 002). Added here, not by
# the compiler, so plan files stay as written; a plan action with the same name or function
# replaces the built-in.
BUILTIN_ACTIONS = (
    ActionSpec(
        name="chat_model_action",
        function="flink_agents.agents:chat_model_action",
        listen_to=("flink_agents.api:ChatRequestEvent", "flink_agents.api:ToolResponseEvent"),
    ),
    ActionSpec(
        name="tool_call_action",
        function="flink_agents.agents:tool_call_action",
        listen_to=("flink_agents.api:ToolRequestEvent",),
    ),
    ActionSpec(
        name="context_retrieval_action",
        function="flink_agents.agents:context_retrieval_action",
        listen_to=("flink_agents.api:ContextRetrievalRequestEvent",),
    ),
)


@dataclass(frozen=True)
class BoundAction:
    """An action ready to call."""

    name: str
    function: Callable[..., Any]
    listen_to: tuple[type[Event], ...]
    is_async: bool
    config: Mapping[str, Any]


@dataclass(frozen=True)
class BoundResource:
    """A resource provider ready to call."""

    spec: ResourceSpec
    provider: Callable[..., Any]


Route = tuple[tuple[BoundAction, ...], bool]
"""The actions an event type triggers, in plan order, and whether it is an output."""


@dataclass
class BoundPlan:
    """A plan with its code imported: what the run engine executes."""

    plan: AgentPlan
    actions: tuple[BoundAction, ...]
    resources: dict[str, BoundResource]
    routes: dict[type, Route] = field(init=False, default_factory=dict)
    """``route``'s answers so far, by event type: routing a sent event on the hot path is
    ``routes.get(type(event)) or route(type(event))``, one lookup in a plain dict, with
    no ``isinstance`` through pydantic's ABC metaclass per event sent (see
    ``bench/RESULTS.md`` on what such checks cost a Flink task)."""

    @property
    def name(self) -> str:
        return self.plan.name

    def actions_for(self, event_type: type) -> tuple[BoundAction, ...]:
        """Actions triggered by an event of ``event_type``, in plan order."""
        return self.route(event_type)[0]

    def route(self, event_type: type) -> Route:
        """The actions an event of ``event_type`` triggers, in plan order, and whether it
        is an ``OutputEvent`` (kept in ``routes``)."""
        route = self.routes.get(event_type)
        if route is None:
            route = self.routes[event_type] = (
                tuple(a for a in self.actions if issubclass(event_type, a.listen_to)),
                issubclass(event_type, OutputEvent),
            )
        return route


def bind_plan(plan: AgentPlan, file: str | None = None) -> BoundPlan:
    """Import and check everything ``plan`` refers to.

    The built-in chat and tool actions (``BUILTIN_ACTIONS``) are bound after the plan's own,
    unless the plan has an action of the same name or function.

    Raises:
        PlanError: naming the file, agent, action or resource, and field at fault.
    """
    own = [_bind_action(plan, spec, file) for spec in plan.actions]
    names = {a.name for a in own}
    # By function, not by how a plan spells it: older plans name a built-in through the
    # private module that defines it.
    builtins = [
        _bind_action(plan, spec, file)
        for spec in BUILTIN_ACTIONS
        if spec.name not in names and not any(a.function is import_ref(spec.function) for a in own)
    ]
    actions = (*own, *builtins)
    resources = {spec.name: _bind_resource(plan, spec, file) for spec in plan.resources}
    return BoundPlan(plan, actions, resources)


def _bind_action(plan: AgentPlan, spec: ActionSpec, file: str | None) -> BoundAction:
    def fail(reason: str, field_name: str) -> PlanError:
        return PlanError(reason, file=file, agent=plan.name, action=spec.name, field=field_name)

    try:
        function = import_ref(spec.function)
    except RefError as error:
        raise fail(str(error), "function") from None
    if isinstance(function, type):
        raise fail(f"{spec.function!r} is a class, not a function", "function")
    if not callable(function):
        raise fail(f"{spec.function!r} is a {type(function).__name__}, not a function", "function")
    try:
        signature = inspect.signature(function)
        signature.bind(None, None)
    except (TypeError, ValueError):
        shown = _signature_text(function)
        raise fail(
            f"an action takes (event, ctx), but {spec.function!r} has signature {shown}",
            "function",
        ) from None
    listen_to = []
    for i, ref in enumerate(spec.listen_to):
        try:
            event_type = import_ref(ref)
        except RefError as error:
            raise fail(f"unknown event type: {error}", f"listen_to[{i}]") from None
        if not (isinstance(event_type, type) and issubclass(event_type, Event)):
            raise fail(
                f"unknown event type: {ref!r} is not a subclass of flink_agents.api.Event",
                f"listen_to[{i}]",
            )
        listen_to.append(event_type)
    return BoundAction(
        name=spec.name,
        function=function,
        listen_to=tuple(listen_to),
        is_async=inspect.iscoroutinefunction(function),
        config=spec.config,
    )


def _bind_resource(plan: AgentPlan, spec: ResourceSpec, file: str | None) -> BoundResource:
    try:
        provider = import_ref(spec.provider)
    except RefError as error:
        raise PlanError(
            str(error), file=file, agent=plan.name, resource=spec.name, field="provider"
        ) from None
    if not callable(provider):
        raise PlanError(
            f"{spec.provider!r} is a {type(provider).__name__}, not callable",
            file=file,
            agent=plan.name,
            resource=spec.name,
            field="provider",
        )
    return BoundResource(spec, provider)


def _signature_text(function: Any) -> str:
    try:
        return str(inspect.signature(function))
    except (TypeError, ValueError):
        return "(unknown)"
