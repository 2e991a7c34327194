"""The agent of the rescale test (module level: Flink's Python workers import it by name).

Each input record is one operation of its key:

- ``{"op": "remember", "text": ...}`` adds ``text`` to the key's ``notes`` memory set;
- ``{"op": "know", "text": ...}`` adds ``text`` to the shared ``facts`` knowledge set;
- ``{"op": "recall", "queries": [...], "fact_queries": [...], "n": ...}`` reports what the
  key finds: the best note for each query, its ``n`` most recent notes, and the best fact
  for each fact query.

Every operation counts itself in the key's short-term memory (``ops``, Flink keyed state)
and answers with one output carrying the count, so the test can tell the operator's state
came through a rescale as well as what the vector store still shows.
"""

from __future__ import annotations

import json
from typing import Any

from flink_agents.api import (
    Agent,
    InputEvent,
    MemorySetItem,
    MemorySetNotFoundError,
    OutputEvent,
    action,
)


class RescaleAgent(Agent):
    """Remembers, teaches and recalls on request; answers every record with one output."""

    @action(InputEvent)
    @staticmethod
    def handle(event: InputEvent, ctx: Any) -> None:
        request = event.input
        ops = (ctx.short_term_memory.get("ops") or 0) + 1
        ctx.short_term_memory.set("ops", ops)
        answer: dict[str, Any] = {"id": request["id"], "key": ctx.key, "ops": ops}
        if request["op"] == "remember":
            ctx.long_term_memory.create_memory_set("notes", str).add(request["text"])
        elif request["op"] == "know":
            ctx.knowledge.create_knowledge_set("facts").add(request["text"])
        else:
            answer.update(recall(ctx, request))
        ctx.send_event(OutputEvent(output=answer))


def recall(ctx: Any, request: dict[str, Any]) -> dict[str, Any]:
    """What the key finds now; None where the set itself is not found."""
    found: dict[str, Any] = {"searched": None, "recent": None, "facts": None}
    try:
        notes = ctx.long_term_memory.get_memory_set("notes")
    except MemorySetNotFoundError:
        pass
    else:
        found["searched"] = {q: _best(notes.search(q, limit=1)) for q in request["queries"]}
        found["recent"] = [item.item for item in notes.get_recent(request["n"])]
    try:
        facts = ctx.knowledge.get_knowledge_set("facts")
    except MemorySetNotFoundError:
        pass
    else:
        found["facts"] = {q: _best(facts.search(q, limit=1)) for q in request["fact_queries"]}
    return found


def _best(items: list[Any]) -> Any:
    """The best match's text (a memory item's ``item``, a knowledge item's ``value``)."""
    if not items:
        return None
    best = items[0]
    return best.item if isinstance(best, MemorySetItem) else best.value


def parse_request(line: str) -> Any:
    """An input line's record (here, not in the job script, which runs as ``__main__``:
    workers import shipped functions by module name)."""
    return json.loads(line)
