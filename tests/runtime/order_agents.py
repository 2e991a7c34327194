"""Module-level agents whose runs end in an order other than their inputs': a run waits on
a gate that a later input's run opens, so the later run surely ends first."""

import threading
import time
from collections import Counter
from collections.abc import Sequence

from flink_agents.api import (
    Agent,
    BaseEmbeddingModel,
    InputEvent,
    OutputEvent,
    ResourceType,
    action,
    resource,
)

GATE = threading.Event()
"""Opened by the run of an input with ``opens``; ``gated`` calls and embeddings of texts
holding "gated" wait for it."""

GATE_TIMEOUT_S = 10
"""How long a gated call waits before it fails: it only waits that long if runs of
different keys did not overlap."""

ATTEMPTS: Counter[str] = Counter()
"""Executions of the action per input ``text``."""


def reset() -> None:
    GATE.clear()
    ATTEMPTS.clear()


def gated(text: str) -> str:
    """A durable call that returns once the gate is open."""
    if not GATE.wait(GATE_TIMEOUT_S):
        raise TimeoutError("the gate never opened: the runs of other keys did not go on")
    return text.upper()


def sleepy(text: str, delay: float) -> str:
    time.sleep(delay)
    return text.upper()


class GatedAgent(Agent):
    """``{"k", "text"}`` plus: ``gated`` (await the gate first), ``opens`` (open it),
    ``fails`` (the number of the input's first executions that raise, or -1 for all).
    Emits two outputs per run, ``key:TEXT:1`` and ``key:TEXT:2``, and counts runs per key
    in short-term memory."""

    @action(InputEvent)
    @staticmethod
    async def call(event: InputEvent, ctx) -> None:
        record = event.input
        ATTEMPTS[record["text"]] += 1
        if record.get("gated"):
            value = await ctx.durable_execute_async(gated, record["text"])
        else:
            value = record["text"].upper()
        if record.get("opens"):
            GATE.set()
        fails = record.get("fails", 0)
        if fails < 0 or ATTEMPTS[record["text"]] <= fails:
            raise ValueError(f"{record['text']} failed")
        ctx.short_term_memory.set("runs", (ctx.short_term_memory.get("runs") or 0) + 1)
        ctx.send_event(OutputEvent(output=f"{ctx.key}:{value}:1"))
        ctx.send_event(OutputEvent(output=f"{ctx.key}:{value}:2"))


class SleepyAgent(Agent):
    """``{"k", "text", "delay"}``: one durable call that sleeps ``delay`` seconds."""

    @action(InputEvent)
    @staticmethod
    async def call(event: InputEvent, ctx) -> None:
        record = event.input
        value = await ctx.durable_execute_async(sleepy, record["text"], record["delay"])
        ctx.send_event(OutputEvent(output=f"{ctx.key}:{value}"))


class GatedEmbedding(BaseEmbeddingModel):
    """The offline model; embedding a text that holds "gated" waits for the gate."""

    def __init__(self) -> None:
        from flink_agents.integrations.embeddings import LocalEmbeddingModel

        self.model = LocalEmbeddingModel()

    @property
    def model_id(self) -> str:
        return self.model.model_id

    @property
    def dimension(self) -> int:
        return self.model.dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if any("gated" in text for text in texts) and not GATE.wait(GATE_TIMEOUT_S):
            raise TimeoutError("the gate never opened: the runs of other keys did not go on")
        return self.model.embed(texts)

    def embed_one(self, text: str) -> list[float]:
        return self.model.embed_one(text)


class NoteAgent(Agent):
    """``{"k", "note"}`` adds the note to long-term memory (its run parks until the item is
    stored) and emits ``key:noted:note``; ``{"k", "opens": True}`` opens the gate and
    emits ``key:opened``."""

    @resource(ResourceType.EMBEDDING_MODEL)
    @staticmethod
    def embedder() -> BaseEmbeddingModel:
        return GatedEmbedding()

    @action(InputEvent)
    @staticmethod
    def handle(event: InputEvent, ctx) -> None:
        record = event.input
        if record.get("opens"):
            GATE.set()
            ctx.send_event(OutputEvent(output=f"{ctx.key}:opened"))
            return
        ctx.long_term_memory.create_memory_set("notes", str).add(record["note"])
        ctx.send_event(OutputEvent(output=f"{ctx.key}:noted:{record['note']}"))
