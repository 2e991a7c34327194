"""An agent that writes many long-term items per action, each through a fresh access to
``ctx.long_term_memory`` / ``ctx.knowledge`` (module level: Flink workers import it by name).

A record ``{"mode": "sync"|"async", "n": N, "fail_once": path?}`` adds N items to the key's
``notes`` and ``todo`` sets and N items to the shared ``facts`` knowledge set, and takes two
external ids. With ``fail_once``, the first execution writes everything, leaves its external
ids in that file and raises: the retry policy runs the action again under the same identity.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action


def _prepare(ctx: RunnerContext) -> None:
    ctx.long_term_memory.create_memory_set("notes", str)
    ctx.long_term_memory.create_memory_set("todo", str)
    ctx.knowledge.create_knowledge_set("facts")


def _add_one(ctx: RunnerContext, tag: str, i: int) -> list[str]:
    """Three items, each through a view of its own."""
    return [
        *ctx.long_term_memory.get_memory_set("notes").add(f"{ctx.key} {tag} note {i}"),
        *ctx.long_term_memory.get_memory_set("todo").add(f"{ctx.key} {tag} todo {i}"),
        *ctx.knowledge.get_knowledge_set("facts").add(f"{ctx.key} {tag} fact {i}"),
    ]


def _finish(ctx: RunnerContext, request: dict[str, Any], ids: list[str]) -> None:
    external = [ctx.external_id(), ctx.external_id()]
    marker = request.get("fail_once")
    if marker and not Path(marker).exists():
        Path(marker).write_text(json.dumps(external))
        raise RuntimeError("failing once, after writing")
    output = {"tag": request["tag"], "ids": ids, "external": external}
    ctx.send_event(OutputEvent(output=output))


def _pause(i: int) -> int:
    time.sleep(0.001)
    return i


class ManyItemsAgent(Agent):
    @action(InputEvent)
    @staticmethod
    def write_sync(event: InputEvent, ctx: RunnerContext) -> None:
        request = event.input
        if request["mode"] != "sync":
            return
        _prepare(ctx)
        ids = [item for i in range(request["n"]) for item in _add_one(ctx, request["tag"], i)]
        _finish(ctx, request, ids)

    @action(InputEvent)
    @staticmethod
    async def write_async(event: InputEvent, ctx: RunnerContext) -> None:
        request = event.input
        if request["mode"] != "async":
            return
        _prepare(ctx)
        ids = []
        for i in range(request["n"]):  # views opened on both sides of every await
            ids += _add_one(ctx, request["tag"], i)
            await ctx.durable_execute_async(_pause, i)
        _finish(ctx, request, ids)
