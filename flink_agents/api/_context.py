"""``RunnerContext``: what an action can do. Each runner implements it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from flink_agents.api._events import Event
from flink_agents.api._memory import MemoryObject
from flink_agents.api._resources import ResourceType


class RunnerContext(ABC):
    """The context handed to an action, valid only while that action runs.

    Everything an action does through it is buffered: sent events and memory writes take
    effect when the action returns, and are discarded if it raises.
    """

    @property
    @abstractmethod
    def key(self) -> Any:
        """The key of the run."""

    @abstractmethod
    def send_event(self, event: Event) -> None:
        """Queue ``event`` for the actions listening to its type; an ``OutputEvent``'s
        payload also becomes an output record."""

    @property
    @abstractmethod
    def sensory_memory(self) -> MemoryObject:
        """Memory of this run only, cleared by the framework when the run ends."""

    @property
    @abstractmethod
    def short_term_memory(self) -> MemoryObject:
        """Memory of this key, kept across its runs and invisible to other keys."""

    def get_short_term_memory(self) -> MemoryObject:
        """The root of short-term memory (seed 000's spelling of ``short_term_memory``)."""
        return self.short_term_memory

    def get_sensory_memory(self) -> MemoryObject:
        """The root of sensory memory."""
        return self.sensory_memory

    @abstractmethod
    def get_resource(self, name: str, type: ResourceType | None = None) -> Any:
        """The resource declared under ``name``, created on first use.

        Raises:
            FlinkAgentsError: no such resource, or it is not of ``type``.
        """

    @property
    @abstractmethod
    def config(self) -> Mapping[str, Any]:
        """The agent's options from its plan (read-only)."""
