"""The demo's agent with a model: triage as in ``support_triage``, plus a drafted reply.

Declared in ``plans/support_replies.yaml``. Each classified ticket is counted into the user's
profile as before, then a chat model drafts a one-line reply; the routing decision is emitted
with the reply once the model answers. Short-term memory and escalations are exactly those of
``support_triage``, so the two plans can be compared run for run.

``stand_in_rules()`` is the script the offline demo gives the scripted LLM server (a TEST
STAND-IN, not a model): a canned reply per category, each marked ``[stand-in]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flink_agents.api import (
    ChatRequestEvent,
    ChatResponseEvent,
    OutputEvent,
    ResourceType,
    RunnerContext,
)
from flink_agents.examples.support_triage import (
    ESCALATE_AFTER,
    EscalationNeeded,
    TicketClassified,
    record_ticket,
)

if TYPE_CHECKING:
    from flink_agents.testing.llm_server import Rule

MODEL = "reply_model"
PROMPT = "reply_prompt"
DECISION = "decision"
REPLY_LIMIT = 200
"""Characters of a reply kept in the output: a model may ignore "one sentence"."""


def draft_reply(event: TicketClassified, ctx: RunnerContext) -> None:
    """Count the ticket into the profile and ask the model for a reply to it."""
    decision, seen = record_ticket(event, ctx)
    ctx.sensory_memory.set(DECISION, decision)
    if seen == ESCALATE_AFTER:
        ctx.send_event(EscalationNeeded(category=event.category, count=seen))
    prompt = ctx.get_resource(PROMPT, ResourceType.PROMPT)
    ctx.send_event(
        ChatRequestEvent(model=MODEL, messages=prompt.format_messages(**decision), tools=[])
    )


def send_reply(event: ChatResponseEvent, ctx: RunnerContext) -> None:
    """Emit the routing decision with the model's reply (its first line) and its token cost."""
    decision = ctx.sensory_memory.get(DECISION)
    lines = [line.strip() for line in event.response.text.strip().splitlines()]
    reply = next((line for line in lines if line), "")
    ctx.send_event(
        OutputEvent(
            output={
                **decision,
                "reply": reply[:REPLY_LIMIT],
                "reply_tokens": event.usage.total_tokens,
            }
        )
    )


_CANNED = {
    "billing": "Sorry about the charge: our finance team will check it within a day.",
    "login": "Sorry you are locked out: our identity team will restore your access.",
    "outage": "Thanks for the report: our SRE team is on the outage now.",
    "shipping": "Sorry about the delay: our logistics team is tracing your package.",
}


def stand_in_rules() -> list[Rule]:
    """The scripted stand-in's answers for the demo: one canned reply per category.

    The prompt's user message says ``(category, priority ...)``; the stand-in matches on
    that and always labels its reply, so nobody takes it for a model's.
    """
    from flink_agents.testing.llm_server import Rule

    rules = [
        Rule(last_user_contains=f"({category},", reply_text=f"[stand-in] {text}")
        for category, text in _CANNED.items()
    ]
    fallback = "Thanks for writing: a support agent will get back to you soon."
    return [*rules, Rule(reply_text=f"[stand-in] {fallback}")]
