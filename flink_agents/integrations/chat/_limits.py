"""Rate limits on a chat model's requests and tokens, kept by the client so that a job slows
down instead of flooding the provider or failing on its ``429`` answers.

A limit is a pace, not a quota per wall-clock minute: ``requests_per_minute=600`` lets one
request go every 100 ms, and ``tokens_per_minute`` spaces requests by the tokens they cost
(each request's estimate first, corrected by the usage its answer reports). Pacing keeps the
rate in any stretch of time at the limit, where a per-minute quota would let a whole minute's
requests out at once at the start of each minute, which providers that check over shorter
windows refuse. A ``429`` answer's ``Retry-After`` holds every later request of the limiter
back as long.

One limiter serves one model resource of one runner (a Flink subtask): every key's calls
through that resource share it. With the ``shared-rate-limits`` option, the places come from
the action log's store instead (``share``), so every subtask on it (every TaskManager's, on
PostgreSQL) keeps to one limit together. The wait happens inside the durable call, so a waiting call
is in flight like one the provider is answering: ``max-in-flight`` of them stop the operator
taking input, which is Flink's backpressure.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from flink_agents.api.internal import DOCUMENT_TOKENS, IMAGE_TOKENS, LOW_DETAIL_IMAGE_TOKENS

Pace = Callable[[str, float, float], float]
"""A shared pace: ``pace(kind, advance_ms, now_ms)`` takes the next place of ``kind``
(``"requests"``, ``"tokens"``) and returns when it starts (``ActionLog.pace``)."""

CHARS_PER_TOKEN = 4
"""The estimate of a request's size before the provider counts it: about four characters of
English text a token, for the tokenizers of current OpenAI-compatible models."""


class RateLimiter:
    """Paces one model's requests: ``reserve`` gives each its time to go.

    Thread-safe: calls of the executor's threads and of the engine's event loop share it.

    Args:
        requests_per_minute: requests allowed per minute, evenly spaced; None: no limit.
        tokens_per_minute: tokens (prompt and completion) per minute; None: no limit.
        clock: seconds, monotonic (tests pass their own).
    """

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        for name, value in (
            ("requests_per_minute", requests_per_minute),
            ("tokens_per_minute", tokens_per_minute),
        ):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive, got {value!r}")
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        self._request_s = 60.0 / requests_per_minute if requests_per_minute else 0.0
        self._token_s = 60.0 / tokens_per_minute if tokens_per_minute else 0.0
        self._clock = clock
        self._lock = threading.Lock()
        self._next_request = -math.inf
        """When the next request may go, by the request pace."""
        self._tokens_paid = -math.inf
        """When the tokens of the requests already let go are paid off, by the token pace."""
        self._paused_until = -math.inf
        """Until when a provider's ``Retry-After`` holds every request back."""
        self.waits = 0
        """Requests that had to wait (for metrics and tests)."""
        self._shared: Pace | None = None

    def share(self, pace: Pace) -> None:
        """Take the places of requests from ``pace`` (``pace(kind, advance_ms, now_ms)``,
        the action log's store: every subtask on it shares the limit) instead of from this
        process. A provider's ``Retry-After`` still holds back this process's requests only."""
        self._shared = pace

    def reserve(self, tokens: int = 0) -> float:
        """Take the next place for a request of about ``tokens`` tokens: the seconds to wait
        before sending it (0: at once). The place is taken whether or not it is used."""
        if self._shared is not None:
            return self._reserve_shared(tokens)
        with self._lock:
            now = self._clock()
            start = max(now, self._next_request, self._tokens_paid, self._paused_until)
            self._next_request = start + self._request_s
            self._tokens_paid = start + tokens * self._token_s
            if start > now:
                self.waits += 1
            return start - now

    def _reserve_shared(self, tokens: int) -> float:
        """``reserve`` from the shared pace, on the wall clock (every machine's)."""
        now_ms = time.time() * 1000
        start_ms = now_ms
        if self._request_s:
            start_ms = max(start_ms, self._shared("requests", self._request_s * 1000, now_ms))
        if tokens and self._token_s:
            start_ms = max(start_ms, self._shared("tokens", tokens * self._token_s * 1000, now_ms))
        with self._lock:
            delay = max((start_ms - now_ms) / 1000, self._paused_until - self._clock())
            if delay > 0:
                self.waits += 1
        return max(delay, 0.0)

    def correct(self, estimated: int, used: int) -> None:
        """A request estimated at ``estimated`` tokens used ``used``: later requests pay for
        the difference (or gain it back)."""
        if self._shared is not None and self._token_s:
            self._shared("tokens", (used - estimated) * self._token_s * 1000, time.time() * 1000)
            return
        if self._token_s:
            with self._lock:
                self._tokens_paid += (used - estimated) * self._token_s

    def pause(self, seconds: float) -> None:
        """Hold every request back for ``seconds`` from now (a provider's ``Retry-After``)."""
        if seconds > 0:
            with self._lock:
                self._paused_until = max(self._paused_until, self._clock() + seconds)

    def wait(self, tokens: int = 0) -> None:
        """Reserve a place and sleep until it comes (a call on an executor thread)."""
        delay = self.reserve(tokens)
        if delay > 0:
            time.sleep(delay)

    async def await_turn(self, tokens: int = 0) -> None:
        """Reserve a place and wait for it on the event loop, holding no thread (a shared
        pace's store is asked on a thread of the loop's own pool)."""
        if self._shared is not None:
            delay = await asyncio.to_thread(self.reserve, tokens)
        else:
            delay = self.reserve(tokens)
        if delay > 0:
            await asyncio.sleep(delay)

    @property
    def limits_tokens(self) -> bool:
        return bool(self._token_s)

    def __repr__(self) -> str:
        return (
            f"RateLimiter(requests_per_minute={self.requests_per_minute}, "
            f"tokens_per_minute={self.tokens_per_minute})"
        )


def estimate_tokens(request: Mapping[str, Any]) -> int:
    """About how many tokens a chat-completions request will cost, before it is sent: its
    messages and tools by their length, an image or a document part at the fixed estimate
    of ``BaseChatModel.estimate_tokens`` (not by the length of its bytes), plus the reply's
    ``max_tokens`` when it is set."""
    messages: Sequence[Any] = request.get("messages") or ()
    chars = tokens = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            tokens += sum(_part_tokens(part) for part in content)
            message = {**message, "content": [p for p in content if p.get("type") == "text"]}
        chars += len(json.dumps(message, ensure_ascii=False))
    chars += sum(len(json.dumps(tool, ensure_ascii=False)) for tool in request.get("tools") or ())
    return math.ceil(chars / CHARS_PER_TOKEN) + tokens + int(request.get("max_tokens") or 0)


def _part_tokens(part: Mapping[str, Any]) -> int:
    kind = part.get("type")
    if kind == "image_url":
        detail = (part.get("image_url") or {}).get("detail")
        return LOW_DETAIL_IMAGE_TOKENS if detail == "low" else IMAGE_TOKENS
    return DOCUMENT_TOKENS if kind == "file" else 0
