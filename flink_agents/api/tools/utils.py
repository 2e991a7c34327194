"""Apache Flink Agents' tool schema helpers (``flink_agents.api.tools.utils``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from flink_agents.api._tools import FunctionTool


def create_schema_from_function(name: str, func: Callable[..., Any]) -> type[BaseModel]:
    """The pydantic model of ``func``'s parameters (from its type hints and docstring), as
    our ``FunctionTool`` makes it; ``name`` names the model."""
    model = FunctionTool(func, name=name)._args_model
    return type(name, (model,), {"__module__": model.__module__})


__all__ = ["create_schema_from_function"]
