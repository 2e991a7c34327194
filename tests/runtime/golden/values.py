"""Events and values named by the golden state fixtures in this directory.

Frozen: the fixtures pickle these classes by this module's path and their field names, as a
user's job pickles its own. Never rename, move or change them; add new ones beside them.
"""

from __future__ import annotations

from uuid import UUID

from pydantic import PrivateAttr

from flink_agents.api import Event, InputEvent

KEY = "u1"
RUN_INPUT = {"text": "hello", "n": 3}
INPUT_ID = UUID("e94ac24f-df2d-54fa-ad1d-55e28ad5c493")


class Note(Event):
    """A user's event, queued in a parked run."""

    text: str
    weight: float = 1.0


NOTE = Note(id=UUID("0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"), text="queued", weight=0.5)
SENT = Note(id=UUID("1a2b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c8d"), text="sent by a member")


def run_input_event() -> InputEvent:
    return InputEvent(id=INPUT_ID, input=RUN_INPUT)


# -- added with the action log's golden payloads (release 0.2.0) ------------------------------


class Flagged(Event):
    """A user's event with a private attribute: the action log keeps it as the model."""

    text: str
    _seen: int = PrivateAttr(default=0)


FLAGGED = Flagged(id=UUID("2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e"), text="kept whole")


class QuotaExceeded(Exception):
    """A user's exception a durable call raised, that pickles as itself."""


class KeywordOnly(Exception):
    """A user's exception that pickle writes but cannot read back: the action log keeps its
    type name and message instead (``RecordedError``)."""

    def __init__(self, *, code: int) -> None:
        super().__init__(f"failed with code {code}")
        self.code = code


# -- added with scheduled events (release 0.3.0) ----------------------------------------------

SCHEDULED = (
    ("ade82660-d4f7-5541-84e2-a6f4f5cbb726", 1_900_000_000_000, NOTE),
    ("841c3832-9beb-590d-958b-857df33c2eb9", 1_900_086_400_000, SENT),
)
"""A key's pending scheduled events: (handle, due time in ms, event), soonest first."""
DUE = ("0f6d1e2a-3b4c-5d6e-8f70-8192a3b4c5d6", 1_899_990_000_000, NOTE)
"""A due scheduled event queued behind the key's run."""


# -- added with sleeping runs (release 0.3.0) --------------------------------------------------

SLEEPING_SEQUENCE = 5
SLEEPING_WAKES = (1_900_000_600_000, 1_900_086_400_000)
"""The head action's sleeps: when each ends (ms), in call order."""
SLEEPING_SENSORY = (("", ("seen",)), ("seen", ("input",)), ("seen.input", "hello"))
"""The sleeping run's sensory memory: (key, stored), an object as its field names."""
SLEEPING_WAKE_MS = 1_900_086_400_000


# -- added with waits for signals (release 0.3.0) ----------------------------------------------


class Approval(Event):
    """A signal a waiting run's action waits for (``ctx.wait_for``)."""

    approved: bool


APPROVAL = Approval(id=UUID("3c4d5e6f-7a8b-4c9d-8e1f-2a3b4c5d6e7f"), approved=True)
WAITING_SEQUENCE = 9
WAITING_UNTIL_MS = 1_900_014_400_000
"""When the second wait of the head action times out; its first has no timeout."""
