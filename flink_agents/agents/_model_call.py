"""Which chat model answers one step of a chat request, and the durable calls that ask it.

A chat model resource may name a ``route`` (a function that picks another chat model resource
for a request) and ``fallbacks`` (chat model resources asked, in order, when a model fails
for good: after its own retries, on a timeout, a rate limit, a refused request). Every
choice is a recorded part of the run's durable calls, so a run restored after a failure asks
the same models in the same order and gets their recorded answers:

- the route's pick is a durable call of its own (a user's function may look at anything);
- each model asked is its own durable call, its failure recorded with it, so a replay fails
  over at the same place and takes the fallback's recorded answer;
- where budgets cover a model, their verdict (the model to ask, after any wait, or the
  ``BudgetExceededError``) is a durable call before it (``SpendGuard.admit``), and what the
  answer used is charged after it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from flink_agents.api import (
    BaseChatModel,
    ChatMessage,
    ChatModelError,
    ChatResponse,
    FlinkAgentsError,
    ResourceType,
    RunnerContext,
    SizeRoute,
    ToolSpec,
)
from flink_agents.api.internal import OutputSchema

logger = logging.getLogger(__name__)


def chat_model(ctx: RunnerContext, name: str) -> BaseChatModel:
    """The chat model resource ``name``.

    Raises:
        FlinkAgentsError: the resource is not a chat model.
    """
    model = ctx.get_resource(name, ResourceType.CHAT_MODEL)
    if not isinstance(model, BaseChatModel):
        raise FlinkAgentsError(
            f"resource {name!r} is a {type(model).__name__}, not a BaseChatModel"
        )
    return model


async def routed(
    ctx: RunnerContext, name: str, model: BaseChatModel, messages: list[ChatMessage]
) -> str:
    """The chat model resource that takes a request made to ``name``: what its ``route``
    picks (recorded), else ``name`` itself.

    Raises:
        FlinkAgentsError: the route picked a resource that is not a chat model.
    """
    route = model.route
    if route is None:
        return name
    if isinstance(route, SizeRoute):  # decided by the messages alone: the same on a replay
        picked = route.pick(model.estimate_tokens(messages))
    else:
        picked = await ctx.durable_execute_async(route, messages)
    if picked is None or picked == name:
        return name
    if not isinstance(picked, str):
        raise FlinkAgentsError(
            f"the route of chat model {name!r} returned {picked!r}: it must return the name "
            "of a chat model resource, or None to keep this one"
        )
    chat_model(ctx, picked)  # fails here, naming the route, if it is no chat model
    return picked


async def ask(
    ctx: RunnerContext,
    name: str,
    messages: Sequence[ChatMessage],
    tools: list[ToolSpec] | None,
    output_schema: OutputSchema | None,
) -> tuple[str, ChatResponse]:
    """Ask chat model ``name``, then its fallbacks in order while they fail for good, each
    where the budgets let it go: the one that answered and its answer.

    Raises:
        ChatModelError: the last of them failed too (the others' failures are logged).
        BudgetExceededError: a budget that fails stopped a call.
    """
    spend: Any = getattr(ctx, "spend", None)
    model = chat_model(ctx, name)
    candidates = (name, *model.fallbacks)
    for position, candidate in enumerate(candidates):
        admitted = None
        if spend is not None and spend.covering(candidate):
            admitted = await _admitted(ctx, spend, candidate, messages, tools)
            candidate = admitted["model"]
        model = chat_model(ctx, candidate)
        # ``achat`` (an async client's call) runs on the engine's event loop, ``chat`` on a
        # thread of the engine's pool.
        chat = model.achat if model.achat is not None else model.chat
        try:
            response = await ctx.durable_execute_async(
                chat, list(messages), tools=tools, output_schema=output_schema
            )
        except ChatModelError as error:
            if admitted is not None and not getattr(ctx, "last_call_replayed", False):
                spend.release(admitted)
            if position + 1 == len(candidates):
                raise
            _fell_back(ctx, candidate, candidates[position + 1], error)
            continue
        if spend is not None:
            ran = not getattr(ctx, "last_call_replayed", False)
            spend.charge(lambda: ctx.short_term_memory, candidate, response.usage, ran, admitted)
        return candidate, response
    raise AssertionError("unreachable: the last candidate returns or raises")


async def _admitted(
    ctx: RunnerContext,
    spend: Any,
    name: str,
    messages: Sequence[ChatMessage],
    tools: list[ToolSpec] | None,
) -> dict[str, Any]:
    """The budgets' verdict on a call asked of ``name``: the chat model resource it goes
    to, and what was reserved for it (a durable call: ``SpendGuard.admit``)."""
    tokens = chat_model(ctx, name).estimate_tokens(messages, tools)
    totals = spend.key_totals(ctx.short_term_memory)
    return await ctx.durable_execute_async(spend.admit, name, tokens, totals)


def _fell_back(ctx: RunnerContext, failed: str, fallback: str, error: ChatModelError) -> None:
    replayed = getattr(ctx, "last_call_replayed", False)
    if replayed:  # counted and logged when it happened
        return
    logger.warning("chat model %r failed (%s); asking its fallback %r", failed, error, fallback)
    metrics: Any = getattr(ctx, "metrics", None)
    if metrics is not None:
        metrics.chat_fallback(failed)
