"""``ForgetKey``: a request to erase everything an agent keeps about one key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ForgetKey:
    """Erase ``key``: put it on the agent's input or signal stream (a record of its own,
    whatever the stream's other records are: its key is taken from it, not by the key
    selector), or run ``flink-agents forget --key K`` on the local action log and stores.

    It takes its turn among the key's records, as an input does: the key's run in progress
    and the inputs that came before it end first. Then its short-term and sensory memory,
    its scheduled events and waiting runs (with their timers), its long-term memory sets,
    the knowledge items its runs added, and its action-log records are removed, and the
    event log confirms it with one record holding nothing of the key's data
    (``key_forgotten``, with ``request_id``). Later records of the key start afresh, as a
    new key's do (``docs/waiting.md``, "Forgetting a key").

    Args:
        key: the key, as the key selector gives it for the key's records.
        request_id: your reference for the request (a ticket number, never personal data),
            echoed in the confirmation.
    """

    key: Any
    request_id: str | None = None

    def __post_init__(self) -> None:
        if self.request_id is not None and not isinstance(self.request_id, str):
            raise TypeError(f"request_id is a str or None, got {type(self.request_id).__name__}")
