"""The ``RunnerContext`` given to one action invocation, with its buffered effects."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from flink_agents.api._context import RunnerContext
from flink_agents.api._errors import FlinkAgentsError
from flink_agents.api._events import Event, InputEvent
from flink_agents.api._memory import MemoryObject
from flink_agents.api._resources import ResourceType
from flink_agents.memory import BufferedState, FlatMemory, StateMap
from flink_agents.runtime._resources import ResourceCache


class ActionContext(RunnerContext):
    """Buffers one action's memory writes and events until the engine commits them."""

    def __init__(
        self,
        key: Any,
        sensory: StateMap,
        short_term: StateMap,
        resources: ResourceCache,
        config: Mapping[str, Any],
    ) -> None:
        self._key = key
        self.sensory_buffer = BufferedState(sensory)
        self.short_term_buffer = BufferedState(short_term)
        self._sensory_root = FlatMemory(self.sensory_buffer).root()
        self._short_term_root = FlatMemory(self.short_term_buffer).root()
        self._resources = resources
        self._config = MappingProxyType(dict(config))
        self.sent: list[Event] = []

    @property
    def key(self) -> Any:
        return self._key

    def send_event(self, event: Event) -> None:
        if not isinstance(event, Event):
            raise TypeError(f"send_event takes an Event, got {type(event).__name__}")
        if isinstance(event, InputEvent):
            raise FlinkAgentsError("actions cannot send an InputEvent: the framework creates it")
        self.sent.append(event)

    @property
    def sensory_memory(self) -> MemoryObject:
        return self._sensory_root

    @property
    def short_term_memory(self) -> MemoryObject:
        return self._short_term_root

    def get_resource(self, name: str, type: ResourceType | None = None) -> Any:
        return self._resources.get(name, type)

    @property
    def config(self) -> Mapping[str, Any]:
        return self._config
