"""``ReActAgent``: reason with a chat model, call tools, loop until a final answer.

The loop itself is the built-in chat flow (``flink_agents.agents._builtin``): this agent only
turns an input into a ``ChatRequestEvent`` and the final ``ChatResponseEvent`` into an
output, so every model and tool call is a durable call of its own action.

Configured by instance (``ReActAgent(chat_model=..., tools=[...])``) or by a plan file. Either
way the plan holds the configuration: resources (the model, the tools, the prompt) and
``config.react``::

    config:
      react:
        chat_model: llm              # a chat_model resource
        tools: [add, multiply]       # tool resources (an mcp_server: all of its tools);
                                     # omitted: the model's own ``tools``
        prompt: question             # optional prompt resource (or an MCP server's prompt)
        skills: skills               # optional skills resource: listed in the system
                                     # prompt, read through its tools (docs/skills.md)
        output_schema: pkg.mod:Answer  # optional pydantic model of the final answer
        max_steps: 8                 # model calls per input before it fails
        max_total_tokens: 20000      # optional: tokens per input before another call fails
        max_time: 120                # optional: seconds per input before another call fails
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from flink_agents._ids import derived_event_id
from flink_agents.api import (
    Agent,
    Budget,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    FlinkAgentsError,
    FunctionTool,
    InputEvent,
    MessageRole,
    OutputEvent,
    Prompt,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    Skills,
    StructuredOutputError,
    Tool,
    ToolSet,
    action,
)
from flink_agents.api.internal import DEFAULT_MAX_STEPS, OfferedPrompt, ref_of

CONFIG_KEY = "react"
SKILLS_RESOURCE = "skills"
"""The resource name ``ReActAgent(skills=...)`` declares its skills under."""
REQUEST_PATH = "_flink_agents.react.request"
"""Sensory memory: the id of this run's chat request, so only its answer becomes output."""

DEFAULT_SYSTEM_PROMPT = (
    "You solve the user's task step by step. Call the tools when they help, as often as "
    "needed, then give the final answer."
)

ToolLike = Callable[..., Any] | Tool | ToolSet | ResourceDescriptor


class ReActAgent(Agent):
    """A ReAct agent: the model reasons, calls tools, sees their results, and answers.

    Args:
        chat_model: the model, as an object that describes itself (``OpenAIChatModel``) or
            a ``ResourceDescriptor``; it becomes the resource ``chat_model``.
        tools: functions (``@tool`` or plain, defined at module level), ``Tool`` objects
            that describe themselves, tool sets (an ``MCPServer``, declared under its
            ``name``: the model gets all of its tools), or a mapping of names to those or to
            descriptors; each becomes a resource named after the tool.
        prompt: a ``Prompt`` or its text, filled in with the input's fields (a dict or
            pydantic input) or ``{input}``, or a prompt a tool set offers
            (``server.prompt("name")``); without one the model gets a short system
            prompt and the input as the user message.
        output_schema: a module-level pydantic model: the final answer is validated into
            it and emitted as the output (otherwise the output is the answer's text).
        skills: ``Skills`` (or their ``ResourceDescriptor``), declared as the resource
            ``skills``: the system prompt lists their names and descriptions, and the model
            gets the tools that read a skill's instructions and files (``docs/skills.md``).
        max_steps: model calls per input; the run fails with ``MaxStepsExceededError``
            when the model still asks for tools after that many.
        max_total_tokens: tokens (prompt and completion, all calls) per input; once used,
            the run fails with ``LoopLimitExceededError`` instead of calling the model
            again. None: no limit.
        max_time: wall time per input (the runner's processing time, from the first model
            call); once past, the run fails with ``LoopLimitExceededError`` instead of
            calling the model again. None: no limit.
        budgets: ``Budget``s on its model calls, written into its plan (``config.budgets``;
            a job's ``budgets`` option replaces one of the same name): ``docs/spend.md``.
        name: the agent's name in its plan.
    """

    def __init__(
        self,
        *,
        chat_model: Any,
        tools: Sequence[ToolLike] | Mapping[str, ToolLike] = (),
        prompt: Prompt | str | OfferedPrompt | None = None,
        output_schema: type[BaseModel] | None = None,
        skills: Skills | ResourceDescriptor | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        max_total_tokens: int | None = None,
        max_time: timedelta | None = None,
        budgets: Sequence[Budget] = (),
        name: str = "react_agent",
    ) -> None:
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        if max_total_tokens is not None and max_total_tokens < 1:
            raise ValueError("max_total_tokens must be at least 1")
        if max_time is not None and not (
            isinstance(max_time, timedelta) and max_time > timedelta(0)
        ):
            raise ValueError(f"max_time must be a positive timedelta, got {max_time!r}")
        if output_schema is not None and not (
            isinstance(output_schema, type) and issubclass(output_schema, BaseModel)
        ):
            raise TypeError(f"output_schema must be a pydantic model class, got {output_schema!r}")
        if skills is not None and not isinstance(skills, Skills | ResourceDescriptor):
            raise TypeError(f"skills must be Skills or a ResourceDescriptor, got {skills!r}")
        self.chat_model = chat_model
        self.tools = tools
        self.prompt = Prompt.from_text(prompt) if isinstance(prompt, str) else prompt
        self.output_schema = output_schema
        self.skills = skills
        self.max_steps = max_steps
        self.max_total_tokens = max_total_tokens
        self.max_time = max_time
        self.budgets = tuple(budgets)
        self.agent_name = name

    def to_plan(self) -> Any:
        """The ``AgentPlan`` of this configured agent (what ``apply`` runs).

        Raises:
            FlinkAgentsError: a part cannot be written into a plan (defined inside a
                function, or a chat model holding an API key given in code).
        """
        from flink_agents.plan import bind_plan, compile_agent, validate_plan_data

        resources = [_resource("chat_model", _describe(self.chat_model, "chat_model"))]
        tool_names = []
        for tool_name, descriptor in _tool_descriptors(self.tools):
            resources.append(_resource(tool_name, descriptor))
            tool_names.append(tool_name)
        react: dict[str, Any] = {
            "chat_model": "chat_model",
            "tools": tool_names,
            "max_steps": self.max_steps,
        }
        if self.max_total_tokens is not None:
            react["max_total_tokens"] = self.max_total_tokens
        if self.max_time is not None:
            react["max_time"] = self.max_time.total_seconds()
        if isinstance(self.prompt, OfferedPrompt):  # found by name among the offered ones
            source = _tool_set_name(self.prompt.source, _given_name(self.tools, self.prompt.source))
            if source not in tool_names:
                resources.append(_resource(source, _describe(self.prompt.source, source)))
            react["prompt"] = self.prompt.name
        elif self.prompt is not None:
            resources.append(_resource("prompt", self.prompt.descriptor()))
            react["prompt"] = "prompt"
        if self.output_schema is not None:
            react["output_schema"] = ref_of(self.output_schema)
        if self.skills is not None:
            if any(r["name"] == SKILLS_RESOURCE for r in resources):
                raise FlinkAgentsError(
                    f"ReActAgent: a tool or prompt is named {SKILLS_RESOURCE!r}, the name its "
                    "skills are declared under; rename it"
                )
            resources.append(_resource(SKILLS_RESOURCE, _describe(self.skills, "skills")))
            react["skills"] = SKILLS_RESOURCE
        data = compile_agent(type(self)).model_dump(mode="json")
        config: dict[str, Any] = {CONFIG_KEY: react}
        if self.budgets:
            config["budgets"] = [budget.model_dump(mode="json") for budget in self.budgets]
        data.update(name=self.agent_name, resources=resources, config=config)
        plan = validate_plan_data(data)
        bind_plan(plan)
        return plan

    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx: RunnerContext) -> None:
        """Turn the input into the chat request that starts the loop."""
        config = _config(ctx)
        prompt = None
        max_time = config.get("max_time")
        if config.get("prompt"):
            prompt = ctx.get_resource(config["prompt"], ResourceType.PROMPT)
        messages = build_messages(prompt, event.input)
        tools = config.get("tools")
        if config.get("skills"):
            messages, tools = _offer_skills(ctx, config, messages, tools)
        request = ChatRequestEvent(
            # Derived from the input's id (the same when a restored job runs the input
            # again), not drawn at random: this action makes no durable call, so it runs
            # again after a restore while the chat actions are replayed from the action log,
            # and their answer must still match the id kept below.
            id=derived_event_id(event.id, "react-request"),
            model=config["chat_model"],
            messages=messages,
            tools=tools,
            output_schema=config.get("output_schema"),
            max_steps=config.get("max_steps", DEFAULT_MAX_STEPS),
            max_total_tokens=config.get("max_total_tokens"),
            max_time=None if max_time is None else timedelta(seconds=max_time),
        )
        ctx.sensory_memory.set(REQUEST_PATH, request.id.hex)
        ctx.send_event(request)

    @action(ChatResponseEvent)
    @staticmethod
    def finish(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        """Emit the final answer: the validated structured output, or the text."""
        if ctx.sensory_memory.get(REQUEST_PATH) != event.request_id.hex:
            return  # an answer to another request of this run
        config = _config(ctx)
        if config.get("output_schema"):
            if event.structured_output is None:
                raise StructuredOutputError(
                    f"the final answer has no structured output for {config['output_schema']}"
                )
            ctx.send_event(OutputEvent(output=event.structured_output))
        else:
            ctx.send_event(OutputEvent(output=event.response.content))


def build_messages(prompt: Prompt | None, record: Any) -> list[ChatMessage]:
    """The first messages for ``record``: the prompt filled with its fields, plus the record
    as the user message when the prompt has none."""
    text = _as_text(record)
    if prompt is None:
        return [
            ChatMessage(role=MessageRole.SYSTEM, content=DEFAULT_SYSTEM_PROMPT),
            ChatMessage(role=MessageRole.USER, content=text),
        ]
    if isinstance(record, BaseModel):
        variables = record.model_dump()
    elif isinstance(record, Mapping):
        variables = {str(k): v for k, v in record.items()}
    else:
        variables = {}
    variables.setdefault("input", text)
    messages = prompt.format_messages(**variables)
    if not any(m.role is MessageRole.USER for m in messages):
        messages.append(ChatMessage(role=MessageRole.USER, content=text))
    return messages


def _offer_skills(
    ctx: RunnerContext,
    config: Mapping[str, Any],
    messages: list[ChatMessage],
    tools: list[str] | None,
) -> tuple[list[ChatMessage], list[str]]:
    """The messages with the skills' summary after their system messages, and the tools
    with the skills' resource (it stands for the tools that read them); no tool list means
    the model's own tools."""
    skills = ctx.get_resource(config["skills"], ResourceType.SKILLS)
    if not isinstance(skills, Skills):
        raise FlinkAgentsError(
            f"resource {config['skills']!r} is a {type(skills).__name__}, not Skills"
        )
    if tools is None:
        tools = list(ctx.get_resource(config["chat_model"], ResourceType.CHAT_MODEL).tools)
    return skills.add_summary(messages), [*tools, config["skills"]]


def _config(ctx: RunnerContext) -> Mapping[str, Any]:
    config = ctx.config.get(CONFIG_KEY)
    if not isinstance(config, Mapping) or not config.get("chat_model"):
        raise FlinkAgentsError(
            "ReActAgent is not configured: its plan needs config.react.chat_model (build it "
            "with ReActAgent(chat_model=...) or write config.react in the plan file)"
        )
    return config


def _as_text(record: Any) -> str:
    if isinstance(record, str):
        return record
    if isinstance(record, BaseModel):
        return record.model_dump_json()
    return json.dumps(record, default=str, ensure_ascii=False)


def _resource(name: str, descriptor: ResourceDescriptor) -> dict[str, Any]:
    return {
        "name": name,
        "type": descriptor.type.value,
        "provider": descriptor.provider,
        "args": descriptor.args,
    }


def _describe(obj: Any, what: str) -> ResourceDescriptor:
    if isinstance(obj, ResourceDescriptor):
        return obj
    describe = getattr(obj, "descriptor", None)
    if callable(describe):
        return describe()
    raise FlinkAgentsError(
        f"ReActAgent: {what} {obj!r} cannot be written into a plan; give an object with a "
        "descriptor() method or a ResourceDescriptor(provider, type, **args)"
    )


def _tool_descriptors(
    tools: Sequence[ToolLike] | Mapping[str, ToolLike],
) -> list[tuple[str, ResourceDescriptor]]:
    named = list(tools.items()) if isinstance(tools, Mapping) else [(None, t) for t in tools]
    found: dict[str, ResourceDescriptor] = {}
    for given_name, item in named:
        if isinstance(item, ResourceDescriptor):
            if given_name is None:
                raise FlinkAgentsError(
                    "ReActAgent: a tool given as a ResourceDescriptor needs a name: pass "
                    "tools as a mapping {name: descriptor}"
                )
            name, descriptor = given_name, item
        elif isinstance(item, ToolSet):
            name = _tool_set_name(item, given_name)
            descriptor = _describe(item, f"tool set {name!r}")
        else:
            tool = item if isinstance(item, Tool) else FunctionTool(item)
            name = given_name or tool.metadata.name
            descriptor = _describe(tool, f"tool {name!r}")
        if name in found:
            raise FlinkAgentsError(f"ReActAgent: two tools are named {name!r}")
        found[name] = descriptor
    return list(found.items())


def _tool_set_name(tool_set: Any, given_name: str | None) -> str:
    """The resource name of a tool set (an MCP server): the mapping's key, else its own."""
    name = given_name or getattr(tool_set, "name", None)
    if not name:
        raise FlinkAgentsError(
            f"ReActAgent: {tool_set!r} needs a name to be declared under: give it one "
            "(MCPServer(..., name='docs')) or pass tools as a mapping {name: server}"
        )
    return name


def _given_name(tools: Sequence[ToolLike] | Mapping[str, ToolLike], item: Any) -> str | None:
    """The name ``tools`` gives ``item`` when it is a mapping holding it."""
    if isinstance(tools, Mapping):
        return next((name for name, given in tools.items() if given is item), None)
    return None
