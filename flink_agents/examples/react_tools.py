"""Tools and the answer schema of ``plans/react_example.yaml``: a calculator ReAct agent."""

from __future__ import annotations

from pydantic import BaseModel, Field

from flink_agents.api import tool


@tool
def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: the first addend.
        b: the second addend.
    """
    return a + b


@tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers.

    Args:
        a: the first factor.
        b: the second factor.
    """
    return a * b


class Calculation(BaseModel):
    """The agent's final answer."""

    result: float = Field(description="the number the question asks for")
    steps: list[str] = Field(default_factory=list, description="the operations, in order")
