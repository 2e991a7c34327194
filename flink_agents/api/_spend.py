"""What model calls may spend: prices of chat models and budgets over time windows.

A ``Budget`` limits the tokens, the cost or the number of calls of chat models, per key or
per agent, in fixed windows of time (a minute, an hour, a day: windows start at multiples
of their length since the Unix epoch, in UTC). The built-in chat action checks a call
against every budget that covers its model before it is made, from the size of the
request, and charges it after, from the usage the provider reports. What happens to a call
over a budget is the budget's ``on_exceeded``: fail the run with ``BudgetExceededError``,
switch to a cheaper model, or wait for the next window. ``docs/spend.md`` has the whole
story; the runtime's ``SpendGuard`` keeps the books.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from flink_agents.api._chat import TokenUsage
from flink_agents.api._errors import FlinkAgentsError

WINDOWS = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}
"""The windows a budget may name instead of giving a duration."""

PER_TOKENS = 1_000_000
"""Prices are per million tokens, as providers list them."""


class ModelPrice(BaseModel):
    """What a chat model costs, per million tokens, in any currency (the same for every
    price of a job: budgets' ``max_cost`` is in it).

    Attributes:
        input: per million prompt tokens.
        cached_input: per million prompt tokens the provider served from its prompt cache
            (None: the ``input`` price).
        output: per million completion tokens.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(0.0, ge=0)
    cached_input: float | None = Field(None, ge=0)
    output: float = Field(0.0, ge=0)

    def cost(self, usage: TokenUsage) -> float:
        """The cost of a call that used ``usage``."""
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        cached_price = self.input if self.cached_input is None else self.cached_input
        return (
            (usage.prompt_tokens - cached) * self.input
            + cached * cached_price
            + usage.completion_tokens * self.output
        ) / PER_TOKENS


class Budget(BaseModel):
    """A limit on what chat model calls spend in each window of time.

    Attributes:
        name: names the budget in errors, metrics and its kept totals (letters, digits,
            ``_`` and ``-``).
        window: how long each window is: ``"minute"``, ``"hour"``, ``"day"``, or a
            duration (a ``timedelta``; in a file seconds or ISO 8601), at least a second.
        scope: ``"key"``: each key has its own totals, kept in its short-term memory
            (Flink state); ``"agent"``: every key of the agent shares them, kept in the
            action log's store (``docs/spend.md`` says how exact that is).
        max_tokens: prompt plus completion tokens per window.
        max_cost: cost per window, by the models' prices.
        max_calls: model calls per window.
        models: the chat model resources it covers; None: all of them.
        on_exceeded: what a call over the budget does: ``"fail"`` the run
            (``BudgetExceededError``, under the error policy), ``"switch"`` to the chat
            model resource ``switch_to``, or ``"wait"`` for the next window (in flight,
            like a model call: the operator takes no more input than ``max-in-flight``
            allows meanwhile).
        switch_to: the chat model resource ``"switch"`` goes to.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    window: timedelta
    scope: Literal["key", "agent"] = "key"
    max_tokens: int | None = Field(None, ge=1)
    max_cost: float | None = Field(None, gt=0)
    max_calls: int | None = Field(None, ge=1)
    models: tuple[str, ...] | None = None
    on_exceeded: Literal["fail", "switch", "wait"] = "fail"
    switch_to: str | None = None

    @field_validator("window", mode="before")
    @classmethod
    def _named_window(cls, value: Any) -> Any:
        if isinstance(value, str) and value in WINDOWS:
            return WINDOWS[value]
        return value

    @field_validator("window")
    @classmethod
    def _whole_seconds(cls, value: timedelta) -> timedelta:
        if value < timedelta(seconds=1):
            raise ValueError(f"a budget's window must be at least a second, got {value}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Budget:
        if self.max_tokens is None and self.max_cost is None and self.max_calls is None:
            raise ValueError(
                f"budget {self.name!r} limits nothing: give max_tokens, max_cost or max_calls"
            )
        if (self.on_exceeded == "switch") != (self.switch_to is not None):
            raise ValueError(
                f"budget {self.name!r}: switch_to goes with on_exceeded='switch' and only with it"
            )
        return self

    @property
    def window_ms(self) -> int:
        return self.window // timedelta(milliseconds=1)

    def window_start(self, now_ms: int) -> int:
        """When the window holding ``now_ms`` began (epoch milliseconds): windows start at
        the multiples of their length since the epoch."""
        return now_ms - now_ms % self.window_ms

    def covers(self, model: str) -> bool:
        """Whether calls of chat model resource ``model`` count against this budget."""
        return self.models is None or model in self.models


class SizeRoute(BaseModel):
    """A chat model resource's ``route`` by the size of the request: requests of more than
    ``over_tokens`` tokens (``BaseChatModel.estimate_tokens``' estimate of the messages) go
    to the chat model resource ``to``; the others stay.

    In a plan: ``route: {over_tokens: 8000, to: long_context}``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    over_tokens: int = Field(ge=0)
    to: str = Field(min_length=1)

    def pick(self, tokens: int) -> str | None:
        """Where a request of about ``tokens`` tokens goes (None: nowhere else)."""
        return self.to if tokens > self.over_tokens else None


class BudgetExceededError(FlinkAgentsError):
    """A model call would go over a budget whose ``on_exceeded`` is ``"fail"``.

    Attributes:
        budget: the budget's name.
        model: the chat model resource the call was for.
        window_end_ms: when the budget's window ends (epoch milliseconds): a call after
            it starts afresh.
    """

    def __init__(self, message: str, *, budget: str, model: str, window_end_ms: int) -> None:
        super().__init__(message)
        self.budget = budget
        self.model = model
        self.window_end_ms = window_end_ms

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (str(self), self.budget, self.model, self.window_end_ms))


def _rebuild(message: str, budget: str, model: str, window_end_ms: int) -> BudgetExceededError:
    return BudgetExceededError(message, budget=budget, model=model, window_end_ms=window_end_ms)
