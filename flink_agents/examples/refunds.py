"""The refund agent of ``flink-agents demo --approvals``: an agent that waits for people.

Declared in ``plans/refunds.yaml``. Each refund request (``customer``, ``refund``,
``amount``, ``reason``) is decided per customer:

- up to ``AUTO_LIMIT``, the agent approves it itself;
- above it, a chat model drafts the request to a person, and the run waits, four hours at
  most, for the customer's ``Approval`` signal from the approvals stream
  (``ctx.wait_for``): approved or refused by that person, or escalated when none came;
- an approved refund schedules a follow-up three days later (``ctx.schedule``);
- an approval that arrives before its request (the two streams are not ordered against
  each other) is kept in the customer's short-term memory, and the request finds it there
  rather than waiting: the decisions are the same whatever the order.

The runs set aside while they wait leave the key free: a customer's other requests are
decided meanwhile (``docs/waiting.md``). ``stand_in_rules()`` is the script the offline demo
gives the scripted LLM server (a TEST STAND-IN, not a model).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from flink_agents.api import (
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    InputEvent,
    OutputEvent,
    ResourceType,
    RunnerContext,
)

if TYPE_CHECKING:
    from flink_agents.testing.llm_server import Rule

AUTO_LIMIT = 100.0
"""Refunds up to this amount are approved without asking anyone."""
WAIT = timedelta(hours=4)
FOLLOW_UP = timedelta(days=3)
MODEL = "approval_model"
PROMPT = "approval_prompt"
REQUEST = "request"
"""Where the run keeps its request (sensory memory) for its later actions."""


class Approval(Event):
    """A person's answer about a refund: a record of the approvals stream."""

    refund: str
    approved: bool
    by: str = "a person"


class FollowUp(Event):
    """Scheduled three days after an approval."""

    refund: str


def review(event: InputEvent, ctx: RunnerContext) -> None:
    """Approve a small refund; for a larger one, use an approval that came early, or have
    the model draft the request to a person."""
    request = event.input
    ctx.sensory_memory.set(REQUEST, request)
    if float(request["amount"]) <= AUTO_LIMIT:
        _decide(ctx, request, approved=True, by="the agent")
        return
    early = ctx.short_term_memory.get(f"early.{request['refund']}")
    if early is not None:
        _decide(ctx, request, approved=early["approved"], by=early["by"])
        return
    prompt = ctx.get_resource(PROMPT, ResourceType.PROMPT)
    messages = prompt.format_messages(
        customer=ctx.key,
        refund=request["refund"],
        amount=request["amount"],
        reason=request["reason"],
    )
    ctx.send_event(ChatRequestEvent(model=MODEL, messages=messages, tools=[]))


async def wait_for_a_person(event: ChatResponseEvent, ctx: RunnerContext) -> None:
    """The model drafted the request to a person (a real deployment sends it here, as a
    durable call); wait for their answer, or escalate."""
    request = ctx.sensory_memory.get(REQUEST)
    answer = await ctx.wait_for(Approval, timeout=WAIT)
    if answer is None:
        ctx.send_event(OutputEvent(output=_status(ctx, request, "escalated: no answer in 4 h")))
        return
    _decide(ctx, request, approved=answer.approved, by=answer.by)


def note_early_approval(event: Approval, ctx: RunnerContext) -> None:
    """An approval no run waits for (its request has not come yet): kept for it."""
    early = {"approved": event.approved, "by": event.by}
    ctx.short_term_memory.set(f"early.{event.refund}", early)


def follow_up(event: FollowUp, ctx: RunnerContext) -> None:
    ctx.send_event(
        OutputEvent(output={"customer": ctx.key, "refund": event.refund, "status": "follow-up"})
    )


def _decide(ctx: RunnerContext, request: dict[str, Any], approved: bool, by: str) -> None:
    if approved:
        ctx.schedule(FollowUp(refund=request["refund"]), delay=FOLLOW_UP)
    status = f"{'approved' if approved else 'refused'} by {by}"
    ctx.send_event(OutputEvent(output=_status(ctx, request, status)))


def _status(ctx: RunnerContext, request: dict[str, Any], status: str) -> dict[str, Any]:
    return {
        "customer": ctx.key,
        "refund": request["refund"],
        "amount": request["amount"],
        "status": status,
    }


def stand_in_rules() -> list[Rule]:
    """The scripted stand-in's answer: a labelled draft of the request to a person."""
    from flink_agents.testing.llm_server import Rule

    return [Rule(reply_text="[stand-in] Please approve or refuse this refund.")]
