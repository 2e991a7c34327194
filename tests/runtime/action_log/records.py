"""Module-level types the action log tests store: picklable, as real events must be."""

from __future__ import annotations

from pydantic import BaseModel

from flink_agents.api import Event
from flink_agents.runtime.action_log import ActionIdentity


class NoteEvent(Event):
    text: str


class ScoreEvent(Event):
    score: float
    tags: list[str]


class Answer(BaseModel):
    """A pydantic value, as memory values and durable-call results may be."""

    text: str
    confidence: float


class QuotaError(Exception):
    """A user exception that pickles as itself."""


class KeywordOnlyError(Exception):
    """An exception pickle writes but cannot read back (its constructor is keyword-only)."""

    def __init__(self, *, code: int) -> None:
        super().__init__(f"failed with code {code}")
        self.code = code


def ident(
    job: str = "job-1", key: str = "k1", run: int = 1, step: int = 1, action: str = "act"
) -> ActionIdentity:
    return ActionIdentity(job=job, key=key, run_sequence=run, step=step, action=action)
