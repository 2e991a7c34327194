"""A support-ticket triage agent: the demo's agent, declared in ``plans/support_triage.yaml``.

Per user (the key) it classifies each ticket, remembers the user's history in short-term
memory and escalates users who keep hitting the same problem. A run emits zero outputs
(a plain "thank you"), one (a routing decision) or two (a decision and an escalation).
No model is needed: classification is by keywords, so the demo runs offline.
"""

from __future__ import annotations

from typing import Any

from flink_agents.api import Event, InputEvent, OutputEvent, RunnerContext

CATEGORIES = {
    "billing": ("refund", "charge", "charged", "invoice", "payment", "bill"),
    "login": ("password", "log in", "login", "locked out", "2fa"),
    "outage": ("down", "outage", "error 500", "not loading", "crash"),
    "shipping": ("delivery", "shipping", "package", "tracking", "arrived"),
}
ROUTES = {"billing": "finance", "login": "identity", "outage": "sre", "shipping": "logistics"}
URGENT_WORDS = ("urgent", "asap", "immediately", "!!!", "again")
CLOSING_WORDS = ("thanks", "thank you", "solved", "resolved")
ESCALATE_AFTER = 3


class TicketClassified(Event):
    """A ticket with its category and urgency (0 to 3)."""

    ticket_id: str
    category: str
    urgency: int


class EscalationNeeded(Event):
    """The user reported the same category too many times."""

    category: str
    count: int


def classify(event: InputEvent, ctx: RunnerContext) -> None:
    """Classify the ticket; keep it in sensory memory for the rest of the run."""
    ticket = event.input
    text = str(ticket.get("text", "")).lower()
    if any(word in text for word in CLOSING_WORDS) and len(text) < 60:
        ctx.short_term_memory.set("last_closed", ticket["id"])
        return
    category = next(
        (name for name, words in CATEGORIES.items() if any(w in text for w in words)), "general"
    )
    urgency = min(3, sum(word in text for word in URGENT_WORDS) + (category == "outage"))
    current = ctx.sensory_memory.new_object("ticket")
    current.set("id", ticket["id"])
    current.set("text", ticket.get("text", ""))
    ctx.send_event(TicketClassified(ticket_id=ticket["id"], category=category, urgency=urgency))


def remember(event: TicketClassified, ctx: RunnerContext) -> None:
    """Update the user's profile and emit the routing decision."""
    decision, seen = record_ticket(event, ctx)
    ctx.send_event(OutputEvent(output=decision))
    if seen == ESCALATE_AFTER:
        ctx.send_event(EscalationNeeded(category=event.category, count=seen))


def record_ticket(event: TicketClassified, ctx: RunnerContext) -> tuple[dict[str, Any], int]:
    """Count the ticket into the user's profile; the routing decision and how many tickets
    of its category the user has sent (shared with ``support_replies``, which adds a reply)."""
    profile = ctx.short_term_memory.get_object("profile") or ctx.short_term_memory.new_object(
        "profile"
    )
    profile.set("tickets", (profile.get("tickets") or 0) + 1)
    seen = (profile.get(f"categories.{event.category}") or 0) + 1
    profile.set(f"categories.{event.category}", seen)
    recent = profile.get("recent") or []
    profile.set("recent", [*recent, event.ticket_id][-3:])
    priority = ("low", "normal", "high", "critical")[min(3, event.urgency + (seen > 1))]
    decision = {
        "user": ctx.key,
        "ticket": event.ticket_id,
        "category": event.category,
        "priority": priority,
        "route": ROUTES.get(event.category, "frontline"),
        "text": ctx.sensory_memory.get("ticket.text"),
    }
    return decision, seen


def escalate(event: EscalationNeeded, ctx: RunnerContext) -> None:
    """Emit an escalation once per category and remember that it was sent."""
    escalated = ctx.short_term_memory.get("escalated") or []
    if event.category in escalated:
        return
    ctx.short_term_memory.set("escalated", [*escalated, event.category])
    ctx.send_event(
        OutputEvent(
            output={
                "user": ctx.key,
                "escalation": event.category,
                "reason": f"{event.count} {event.category} tickets",
                "ticket": ctx.sensory_memory.get("ticket.id"),
            }
        )
    )
