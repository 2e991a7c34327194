"""When and how long to retry a failed model call (on tenacity).

Retried: timeouts, connection failures, 408, 409, 429 and 5xx; anything else (a bad request,
a wrong key) fails at once, since repeating it cannot help. Waits grow exponentially, and a
server's ``Retry-After`` is honoured up to the maximum wait.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import openai
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)
from tenacity.wait import wait_base

_RETRYABLE_STATUS = frozenset({408, 409, 429})

# What an error's text may quote of the request and must not repeat: inline bytes (a data:
# URL, a long run of base64) and a URL's query, where signed URLs keep their credentials.
_DATA_URL = re.compile(r"data:[^\s'\"<>]*")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/=_-]{64,}")
_URL_QUERY = re.compile(r"(https?://[^\s'\"<>?#]+)[?#][^\s'\"<>]*")


@dataclass(frozen=True)
class RetryPolicy:
    """How a model retries.

    Attributes:
        max_retries: retries after the first attempt (0 disables retrying).
        initial_wait: seconds before the first retry; doubles with each retry.
        max_wait: the longest wait between two attempts, ``Retry-After`` included.
    """

    max_retries: int = 3
    initial_wait: float = 0.5
    max_wait: float = 20.0

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.initial_wait < 0 or self.max_wait < 0:
            raise ValueError(f"retry settings must not be negative: {self}")

    def retrying(self, before_sleep: Callable[[RetryCallState], None]) -> Retrying:
        """A fresh tenacity controller for one call (they hold per-call state)."""
        return Retrying(**self._settings(before_sleep))

    def async_retrying(self, before_sleep: Callable[[RetryCallState], None]) -> AsyncRetrying:
        """The same for a call awaited on an event loop (waits are ``asyncio.sleep``)."""
        return AsyncRetrying(**self._settings(before_sleep))

    def _settings(self, before_sleep: Callable[[RetryCallState], None]) -> dict[str, Any]:
        return {
            "stop": stop_after_attempt(self.max_retries + 1),
            "wait": _WaitRetryAfter(self.initial_wait, self.max_wait),
            "retry": retry_if_exception(is_retryable),
            "before_sleep": before_sleep,
            "reraise": True,
        }


def is_retryable(error: BaseException) -> bool:
    """Whether repeating the call might succeed."""
    if isinstance(error, openai.APIConnectionError):  # timeouts included
        return True
    if isinstance(error, openai.APIStatusError):
        return error.status_code in _RETRYABLE_STATUS or error.status_code >= 500
    return False


def status_of(error: BaseException) -> int | None:
    """The HTTP status of a failed call, or None for a timeout or connection failure."""
    return error.status_code if isinstance(error, openai.APIStatusError) else None


def describe(error: BaseException, limit: int = 200) -> str:
    """A short, credential-free account of a failed call."""
    if isinstance(error, openai.APITimeoutError):
        return "timed out"
    if isinstance(error, openai.APIConnectionError):
        return f"connection failed ({type(error.__cause__ or error).__name__})"
    if isinstance(error, openai.APIStatusError):
        body = error.body if isinstance(error.body, dict) else {}
        text = f"HTTP {error.status_code}: {body.get('message') or error.message}"
    else:
        text = f"{type(error).__name__}: {error}"
    text = scrub(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def scrub(text: str) -> str:
    """``text`` without what it may quote of a request's parts: ``data:`` URLs, long runs
    of base64 and URLs' queries (a signed URL's credentials) become ``...``."""
    text = _DATA_URL.sub("data:...", text)
    text = _URL_QUERY.sub(r"\1?...", text)
    return _BASE64_RUN.sub("...", text)


class _WaitRetryAfter(wait_base):
    """Exponential backoff, or the server's ``Retry-After`` when it asks for longer."""

    def __init__(self, initial: float, maximum: float) -> None:
        self._maximum = maximum
        self._exponential = wait_exponential(multiplier=initial, max=maximum)

    def __call__(self, retry_state: RetryCallState) -> float:
        wait = self._exponential(retry_state)
        outcome = retry_state.outcome
        error = outcome.exception() if outcome is not None else None
        return min(self._maximum, max(wait, retry_after(error)))


def retry_after(error: Any) -> float:
    """The seconds a failed call's ``Retry-After`` header asks for (0 without one)."""
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return 0.0
    try:
        return max(0.0, float(headers.get("retry-after", 0)))
    except (TypeError, ValueError):  # an HTTP date: not worth parsing for a capped wait
        return 0.0


def log_retry(
    logger: logging.Logger, label: str, attempts: int
) -> Callable[[RetryCallState], None]:
    """A ``before_sleep`` hook that logs each retry without credentials."""

    def before_sleep(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        logger.warning(
            "%s: attempt %d of %d failed (%s); retrying in %.2fs",
            label,
            state.attempt_number,
            attempts,
            describe(error) if error is not None else "failed",
            delay,
        )

    return before_sleep
