"""The built-in chat and tool actions, bound into every plan (seed 002: no user plumbing).

An agent sends ``ChatRequestEvent(model=..., messages=...)`` and listens to
``ChatResponseEvent``; between the two, these actions call the model and its tools:

    ChatRequestEvent ──► chat_model_action ──► ChatResponseEvent        (final answer)
                               │      ▲
                  ToolRequestEvent    ToolResponseEvent
                               ▼      │
                          tool_call_action

**Where the conversation lives while tools run.** In sensory memory, under
``_flink_agents.chats.<tool request id>``: the chat action stores the conversation (and its
step count and token usage) when it asks for tools, and takes it back when the matching
``ToolResponseEvent`` arrives. Sensory memory is per run and cleared by the framework when the
run ends, which is exactly the lifetime of a chat; it is checkpointed with the run and
buffered per action, so a failed action leaves no half-updated conversation. Carrying the
conversation in the events instead would make ``ToolRequestEvent`` a chat-specific event
and copy the whole conversation into every event of the loop.

**Durability.** Every model call and every tool call goes through
``ctx.durable_execute_async``, so the action log records it and a recovered job reuses the
recorded result instead of paying again. Each model call and each tool round is its own
action, so a failure repeats at most one of them.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from flink_agents.agents._model_call import ask, chat_model, routed
from flink_agents.api import (
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    FlinkAgentsError,
    LoopLimitExceededError,
    MaxStepsExceededError,
    MessageRole,
    ResourceType,
    RunnerContext,
    SubAgent,
    TokenUsage,
    Tool,
    ToolRequestEvent,
    ToolResponseEvent,
    ToolResult,
    ToolSet,
    ToolSpec,
    ToolUnavailableError,
    UnknownResourceError,
)
from flink_agents.api.agents.agent import STRUCTURED_OUTPUT
from flink_agents.api.internal import resolve_output_schema

_MS = timedelta(milliseconds=1)

CHATS_PATH = "_flink_agents.chats"
"""Sensory-memory object holding the conversations waiting on tool results."""


class ChatSession(BaseModel):
    """An in-flight chat request, kept in sensory memory while its tools run."""

    request_id: str
    model: str
    messages: list[ChatMessage]
    tools: list[str] | None
    output_schema: str | dict[str, Any] | None
    max_steps: int
    max_total_tokens: int | None = None
    max_time_ms: int | None = None
    started_ms: int | None = None
    """When the request's first model call was about to be made (``max_time`` counts from
    there), on the runner's clock."""
    steps: int = 0
    usage: TokenUsage = TokenUsage()


async def chat_model_action(
    event: ChatRequestEvent | ToolResponseEvent, ctx: RunnerContext
) -> None:
    """Ask the model; on tool calls hand them to the tool action, else answer the request."""
    if isinstance(event, ChatRequestEvent):
        session = ChatSession(
            request_id=str(event.id),
            model=event.model,
            messages=list(event.messages),
            tools=event.tools,
            output_schema=event.output_schema,
            max_steps=event.max_steps,
            max_total_tokens=event.max_total_tokens,
            max_time_ms=None if event.max_time is None else event.max_time // _MS,
            started_ms=_now_ms(ctx),
        )
    elif isinstance(event, ToolResponseEvent):
        path = f"{CHATS_PATH}.{event.request_id.hex}"
        stored = ctx.sensory_memory.get(path)
        if stored is None:  # a tool request this action did not make
            return
        ctx.sensory_memory.delete(path)
        session = ChatSession.model_validate(stored)
        session.messages.extend(_tool_message(result) for result in event.results)
        _check_limits(session, ctx, asking=None)
    else:
        return

    model = chat_model(ctx, session.model)
    tool_names = session.tools if session.tools is not None else list(model.tools)
    specs = _tool_specs(ctx, tool_names)
    schema = resolve_output_schema(session.output_schema)
    target = await routed(ctx, session.model, model, session.messages)
    answered_by, response = await ask(ctx, target, session.messages, specs or None, schema)
    session.steps += 1
    session.usage = session.usage + response.usage
    metrics = getattr(ctx, "metrics", None)
    if metrics is not None and not getattr(ctx, "last_call_replayed", False):
        usage = response.usage
        metrics.chat_request(
            answered_by, usage.prompt_tokens, usage.completion_tokens, response.attempts - 1
        )
    message = response.message

    if message.tool_calls:
        _check_limits(session, ctx, asking=", ".join(call.name for call in message.tool_calls))
        session.messages.append(message)
        request = ToolRequestEvent(model=session.model, tool_calls=message.tool_calls)
        ctx.sensory_memory.set(f"{CHATS_PATH}.{request.id.hex}", session)
        ctx.send_event(request)
        return

    if response.structured is not None:  # also where Apache Flink Agents' actions read it
        extra = {**message.extra_args, STRUCTURED_OUTPUT: response.structured}
        message = message.model_copy(update={"extra_args": extra})
    ctx.send_event(
        ChatResponseEvent(
            request_id=session.request_id,
            model=answered_by,
            response=message,
            structured_output=response.structured,
            usage=session.usage,
        )
    )


def _check_limits(session: ChatSession, ctx: RunnerContext, asking: str | None) -> None:
    """Fail the request if it may not ask the model again: ``asking`` names the tools the
    model's last answer asks for (the step limit counts then), None when tool results are
    back (only tokens and time can have run out while the tools ran).

    Raises:
        LoopLimitExceededError: a limit is reached (``MaxStepsExceededError`` for steps).
    """
    where = f"chat request {session.request_id} to {session.model!r}"
    still = f"; the model still asks for tools: {asking}" if asking is not None else ""
    if asking is not None and session.steps >= session.max_steps:
        raise MaxStepsExceededError(
            f"{where} made {session.steps} model calls (max_steps={session.max_steps}) "
            f"without a final answer{still}",
            used=session.steps,
            allowed=session.max_steps,
        )
    used = session.usage.total_tokens
    if session.max_total_tokens is not None and used >= session.max_total_tokens:
        raise LoopLimitExceededError(
            f"{where} used {used} tokens in {session.steps} model calls "
            f"(max_total_tokens={session.max_total_tokens}) without a final answer{still}",
            limit="tokens",
            used=used,
            allowed=session.max_total_tokens,
        )
    if session.max_time_ms is not None and session.started_ms is not None:
        elapsed_ms = _now_ms(ctx) - session.started_ms
        if elapsed_ms >= session.max_time_ms:
            raise LoopLimitExceededError(
                f"{where} took {elapsed_ms / 1000:.3f}s in {session.steps} model calls "
                f"(max_time={session.max_time_ms / 1000:g}s) without a final answer{still}",
                limit="time",
                used=elapsed_ms / 1000,
                allowed=session.max_time_ms / 1000,
            )


def _now_ms(ctx: RunnerContext) -> int:
    """The runner's clock (the local runner's simulated one), or the wall clock."""
    now_ms = getattr(ctx, "now_ms", None)
    return now_ms() if now_ms is not None else time.time_ns() // 1_000_000


async def tool_call_action(event: ToolRequestEvent, ctx: RunnerContext) -> None:
    """Run each requested tool in order; failures become error results for the model."""
    results = []
    for call in event.tool_calls:
        try:
            tool = ctx.get_resource(call.name, ResourceType.TOOL)
        except UnknownResourceError:
            results.append(ToolResult(tool_call_id=call.id, name=call.name, error="no such tool"))
            continue
        if isinstance(call.arguments, str):
            error = f"the arguments are not a JSON object: {call.arguments[:200]!r}"
            results.append(ToolResult(tool_call_id=call.id, name=call.name, error=error))
            continue
        try:
            if isinstance(tool, SubAgent):  # runs for this key; its calls are its own
                outputs = await ctx.run_agent_async(call.name, tool.input_of(call.arguments))
                content = outputs[0] if len(outputs) == 1 else outputs
            else:
                # ``acall`` (an async def tool) on the engine's event loop, ``call`` on a thread.
                run = tool.acall if tool.acall is not None else tool.call
                content = await ctx.durable_execute_async(run, call.arguments)
        except ToolUnavailableError:  # a dead MCP server: the error policy decides
            raise
        except Exception as failure:  # the model is told and may try again
            results.append(
                ToolResult(
                    tool_call_id=call.id,
                    name=call.name,
                    error=f"{type(failure).__name__}: {failure}",
                )
            )
            continue
        results.append(ToolResult(tool_call_id=call.id, name=call.name, content=content))
    ctx.send_event(ToolResponseEvent(request_id=event.id, results=results))


def _tool_specs(ctx: RunnerContext, names: list[str]) -> list[ToolSpec]:
    """What the model is told about the tools ``names``: a tool set's resource (an MCP
    server) stands for all of its tools, each under its own name."""
    specs: dict[str, ToolSpec] = {}
    for name in names:
        found = ctx.get_resource(name)
        if isinstance(found, ToolSet):
            offered = [tool.metadata for tool in found.list_tools()]
        else:
            offered = [_tool_spec(ctx, name)]
        for spec in offered:
            if spec.name in specs:
                raise FlinkAgentsError(
                    f"two tools offered to the model are named {spec.name!r} (from the tool "
                    f"list {names}): a model cannot tell them apart"
                )
            specs[spec.name] = spec
    return list(specs.values())


def _tool_spec(ctx: RunnerContext, name: str) -> ToolSpec:
    """What the model is told about the tool resource ``name``; it calls it by that name."""
    tool = ctx.get_resource(name, ResourceType.TOOL)
    if not isinstance(tool, Tool):
        raise FlinkAgentsError(f"resource {name!r} is a {type(tool).__name__}, not a Tool")
    spec = tool.metadata
    return spec if spec.name == name else spec.model_copy(update={"name": name})


def _tool_message(result: ToolResult) -> ChatMessage:
    return ChatMessage(
        role=MessageRole.TOOL,
        content=result.text(),
        tool_call_id=result.tool_call_id,
        name=result.name,
    )
