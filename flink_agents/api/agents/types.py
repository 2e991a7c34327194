"""Apache Flink Agents' agent types (``flink_agents.api.agents.types``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class OutputSchema(BaseModel):
    """The schema of an agent's output: a pydantic model class (a pyflink ``RowTypeInfo``
    is not supported here: give a pydantic model)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    output_schema: Any


__all__ = ["OutputSchema"]
