"""Tools as Apache Flink Agents names them (``flink_agents.api.tools.tool``).

``Tool``, ``FunctionTool`` and ``ToolType`` are ours or thin over ours; ``ToolMetadata``
(their tool description, with a pydantic model of the arguments) converts to our
``ToolSpec``.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict

from flink_agents.api._tools import FunctionTool, ToolSpec, strip_titles
from flink_agents.api._tools import Tool as _Tool


class ToolType(Enum):
    """Where a tool comes from."""

    MODEL_BUILT_IN = "model_built_in"
    FUNCTION = "function"
    REMOTE_FUNCTION = "remote_function"
    MCP = "mcp"


class ToolMetadata(BaseModel):
    """A tool's name, description and arguments as a pydantic model class."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str
    description: str
    args_schema: type[BaseModel]

    def get_parameters_dict(self) -> dict[str, Any]:
        """The arguments' JSON schema (type, properties, required, definitions)."""
        schema = self.args_schema.model_json_schema()
        kept = ("type", "properties", "required", "definitions", "$defs")
        return {k: v for k, v in schema.items() if k in kept}

    def to_spec(self) -> ToolSpec:
        """Our ``ToolSpec`` of the same tool."""
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=strip_titles(self.get_parameters_dict()),
        )


class Tool(_Tool):
    """Base of tools; ``Tool.from_callable(f)`` is our ``FunctionTool`` of ``f``."""

    @staticmethod
    def from_callable(func: Callable[..., Any]) -> FunctionTool:
        """A tool calling ``func`` (a module-level function)."""
        return FunctionTool(func)

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.metadata.name

    @classmethod
    def tool_type(cls) -> ToolType:
        """Where the tool comes from."""
        return ToolType.FUNCTION


__all__ = ["FunctionTool", "Tool", "ToolMetadata", "ToolType"]
