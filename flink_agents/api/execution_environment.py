"""The execution environment as Apache Flink Agents defines it
(``flink_agents.api.execution_environment``).

``AgentsExecutionEnvironment.get_execution_environment()`` here returns an environment with
their methods over ours: ``from_list`` of ``{"key": ..., "value": ...}`` records whose
``to_list()`` is filled by ``execute()``, ``from_datastream(input=..., key_selector=...)``
taking a pyflink ``KeySelector``, ``get_config()``, ``add_resource`` and ``execute()``
(``docs/migrating.md``). Our own environment stays ``flink_agents.api``'s.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import Any

from flink_agents.api._resources import ResourceType
from flink_agents.api.configuration import Configuration


class AgentBuilder(ABC):
    """An input with an agent applied: take its outputs."""

    @abstractmethod
    def apply(self, agent: Any) -> AgentBuilder:
        """Run ``agent`` over this input."""

    @abstractmethod
    def to_list(self) -> list[dict[str, Any]]:
        """The outputs as ``{key: output}`` dicts, filled by ``execute()`` (local only)."""

    @abstractmethod
    def to_datastream(self) -> Any:
        """The outputs as a DataStream (Flink only)."""

    @abstractmethod
    def to_table(self, schema: Any, output_type: Any) -> Any:
        """The outputs as a Table of ``schema`` (Flink only)."""


class AgentsExecutionEnvironment(ABC):
    """Where agents of Apache Flink Agents' kind run: locally, or on Flink."""

    @staticmethod
    def get_execution_environment(
        env: Any = None, t_env: Any = None, **kwargs: Any
    ) -> AgentsExecutionEnvironment:
        """The local environment when ``env`` is None, else the Flink one over ``env``;
        ``kwargs`` are options of ours (``num_async_threads=...``)."""
        return importlib.import_module("flink_agents.migration").environment(env, t_env, **kwargs)

    @property
    @abstractmethod
    def resources(self) -> dict[ResourceType, dict[str, Any]]:
        """The resources added with ``add_resource``, by type and name."""

    @abstractmethod
    def get_config(self, path: str | None = None) -> Configuration:
        """The configuration (after adding a YAML file's values, with ``path``)."""

    @abstractmethod
    def from_list(self, input: list[dict[str, Any]]) -> AgentBuilder:
        """Records ``{"key": ..., "value": ...}`` (or ``k``, ``v``) as the input (local)."""

    @abstractmethod
    def from_datastream(self, input: Any, key_selector: Any = None) -> AgentBuilder:
        """A DataStream as the input, keyed by a ``KeySelector`` or a function (Flink)."""

    @abstractmethod
    def from_table(self, input: Any, key_selector: Any = None) -> AgentBuilder:
        """A Table as the input (Flink)."""

    @abstractmethod
    def execute(self) -> None:
        """Run what was built: the local inputs, or the Flink job."""

    @abstractmethod
    def add_resource(
        self, name: str, resource_type: ResourceType, instance: Any
    ) -> AgentsExecutionEnvironment:
        """A resource every agent applied here may use (an agent's own of the same name
        wins)."""


__all__ = ["AgentBuilder", "AgentsExecutionEnvironment"]
