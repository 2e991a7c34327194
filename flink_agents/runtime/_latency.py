"""How long each action's durable calls take, as this process has seen them: ``CallLatency``.

``ParkedRuns`` reads it to choose when to check a parked run first (``first_check_ms``) and
whether an action's calls are steady enough to trust that; the calls' done-callbacks teach
it (``learn``).
"""

from __future__ import annotations

from typing import NamedTuple

STEADY_AFTER_CALLS = 8
"""Calls of an action after which its latency counts as known (``steady``): ``ParkedRuns``
then no longer checks its parked runs once early, before their calls' expected end."""


class Latency(NamedTuple):
    """What the calls of one action have shown of their duration."""

    expected_ms: float
    """A moving average of how long the calls take, that follows a quicker call at once."""
    overshoot_ms: float | None
    """A moving average of how far past ``expected_ms`` the calls end (None after one)."""
    calls: int
    """How many calls the estimates have seen (counted up to ``STEADY_AFTER_CALLS``)."""


class CallLatency:
    """Per action, what this process has seen of how long its durable calls take. Written
    by the calls' done-callbacks (on executor threads), read when a run parks."""

    __slots__ = ("_expected_ms", "_overshoot_ms", "_timed")

    def __init__(self) -> None:
        self._expected_ms: dict[str, float] = {}
        self._overshoot_ms: dict[str, float] = {}
        self._timed: dict[str, int] = {}

    def learn(self, action: str, took_ms: float) -> None:
        """A call of ``action`` took ``took_ms``."""
        expected, overshoot, timed = self._expected_ms, self._overshoot_ms, self._timed
        estimate = expected.get(action)
        # Down at once, up by a quarter of the difference: an estimate that rarely lies
        # after a call's end, so waiting for it seldom delays a resume.
        if estimate is None or took_ms < estimate:
            expected[action] = took_ms
        else:
            expected[action] = estimate + (took_ms - estimate) / 4
        if estimate is not None:
            past = max(0.0, took_ms - estimate)
            average = overshoot.get(action, past)
            overshoot[action] = average + (past - average) / 8
        if timed.get(action, 0) < STEADY_AFTER_CALLS:
            timed[action] = timed.get(action, 0) + 1

    def assume(
        self, action: str, expected_ms: float, overshoot_ms: float | None = None, calls: int = 1
    ) -> None:
        """Start from estimates for ``action`` as if ``calls`` calls had shown them."""
        self._expected_ms[action] = expected_ms
        if overshoot_ms is None:
            self._overshoot_ms.pop(action, None)
        else:
            self._overshoot_ms[action] = overshoot_ms
        self._timed[action] = min(calls, STEADY_AFTER_CALLS)

    def of(self, action: str) -> Latency | None:
        """What ``action``'s calls have shown so far (None before the first ends)."""
        expected = self._expected_ms.get(action)
        if expected is None:
            return None
        return Latency(expected, self._overshoot_ms.get(action), self._timed.get(action, 0))

    def steady(self, action: str) -> bool:
        """Whether enough of ``action``'s calls have been seen to trust the estimates."""
        return self._timed.get(action, 0) >= STEADY_AFTER_CALLS

    def first_check_ms(self, action: str, grid_ms: int) -> float | None:
        """When, after it parks, to check a run of ``action`` first, if its calls have shown
        how long they take: the earliest they have recently ended plus twice how far past
        it they end on average, so that a steady action's runs are mostly resumed by that
        one check rather than by the backoff step after it (each check is a timer, a
        Python callback); the margin is at most a twentieth of the expected time (or one
        poll interval, ``grid_ms``), so an action of varied latency keeps resuming its
        quick calls early."""
        expected = self._expected_ms.get(action)
        if expected is None:
            return None
        past = self._overshoot_ms.get(action)
        if not past:
            return expected
        return expected + min(2 * past, max(grid_ms, expected / 20))
