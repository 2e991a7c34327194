"""Sub-agents (seed 002's hierarchical agents): another agent, run by an action as one step.

An action runs a sub-agent for its own key with ``ctx.run_agent(name, input)`` (or ``await
ctx.run_agent_async(...)``), where ``name`` is a ``SubAgent`` resource; the sub-agent's
outputs come back to the action as a list instead of going to the job's output. A
``SubAgent`` is also a ``Tool``: offered to ``ReActAgent`` (or named in a chat request's
tools), the model can call it with ``{"input": ...}`` and gets its outputs as the result.

The sub-run has its own sensory memory. Its short-term memory is the caller's (shared) or
its own, kept per key under the caller's state but out of the caller's sight (the default):
either way its writes commit with the calling action, and are undone with it when it fails.
Its durable calls are recorded in the action log as its actions' own, so a restore replays
the sub-agent's completed actions and repeats none of their calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flink_agents._ids import durable_name
from flink_agents.api._errors import FlinkAgentsError
from flink_agents.api._refs import ref_of
from flink_agents.api._resources import ResourceDescriptor, ResourceType
from flink_agents.api._tools import Tool, ToolArgumentsError, ToolSpec

_INPUT_SCHEMA = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "what to ask the agent"}},
    "required": ["input"],
}


class SubAgent(Tool):
    """Another agent, declared as a resource of the agent that calls it.

    Args:
        agent: the sub-agent: an ``Agent`` subclass, its ``"module:qualname"``, or the path
            of a plan file (YAML or JSON).
        description: what the sub-agent does, for a model that may call it as a tool.
        share_short_term_memory: True: the sub-run reads and writes the caller's short-term
            memory; False (default): it has a short-term memory of its own for each key,
            which lasts across its runs but which the caller does not see.
        name: the tool name a model sees (default: the resource's name).
        input_schema: the JSON schema of the tool's arguments (default: one string,
            ``input``); the arguments object becomes the sub-run's input, or its ``input``
            field when the schema is the default.
    """

    def __init__(
        self,
        agent: Any,
        *,
        description: str = "",
        share_short_term_memory: bool = False,
        name: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
    ) -> None:
        if isinstance(agent, Path):
            agent = str(agent)
        if not isinstance(agent, str):
            agent = ref_of(agent)  # an Agent subclass, by reference: plans must name it
        self.agent = agent
        self.description = description
        self.share_short_term_memory = share_short_term_memory
        self.name = name
        self.input_schema = dict(input_schema) if input_schema is not None else None

    @property
    def metadata(self) -> ToolSpec:
        name = self.name or self.agent.rpartition(":")[2].rpartition("/")[2].split(".")[0]
        return ToolSpec(
            name=name,
            description=self.description,
            parameters=self.input_schema or _INPUT_SCHEMA,
        )

    def input_of(self, arguments: Mapping[str, Any]) -> Any:
        """The sub-run's input for a model's tool arguments.

        Raises:
            ToolArgumentsError: the default schema's ``input`` is missing.
        """
        if self.input_schema is not None:
            return dict(arguments)
        if "input" not in arguments:
            raise ToolArgumentsError(f"sub-agent {self.agent!r} takes {{'input': ...}}")
        return arguments["input"]

    @durable_name("flink_agents.api._sub_agent:SubAgent.call")
    def call(self, arguments: Mapping[str, Any]) -> Any:
        raise FlinkAgentsError(
            f"sub-agent {self.agent!r} runs inside an action, for its key: use "
            "ctx.run_agent(...) or offer it to a chat model as a tool"
        )

    def descriptor(self) -> ResourceDescriptor:
        args: dict[str, Any] = {"agent": self.agent}
        if self.description:
            args["description"] = self.description
        if self.share_short_term_memory:
            args["share_short_term_memory"] = True
        if self.name is not None:
            args["name"] = self.name
        if self.input_schema is not None:
            args["input_schema"] = self.input_schema
        return ResourceDescriptor(SubAgent, ResourceType.TOOL, **args)

    def __repr__(self) -> str:
        return f"SubAgent({self.agent!r})"
