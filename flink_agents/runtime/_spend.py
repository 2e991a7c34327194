"""The books of budgets: what chat model calls spent, per key and per agent, in each window,
and whether the next call may go (``docs/spend.md``).

One ``SpendGuard`` per engine (per Flink subtask); without budgets it only counts what
calls cost. The built-in chat action asks it before every model call that a budget covers,
and tells it after every call:

- ``admit`` is a durable call (its answer is recorded, so a restored run takes the same
  model without asking again). It checks the call against every budget covering its
  model, from the request's estimated size, and decides by the first one it would go over:
  fail, switch to another model (checked in turn), or wait, in flight, for the window's
  end.
- ``charge`` adds a call's usage: to a key budget's totals in the key's short-term memory
  (Flink state, written with the action, so a replayed action charges once), and to an
  agent budget's totals in the action log's store (shared by every subtask on one
  PostgreSQL), only for calls that really ran, settling the estimate ``admit`` added.

Windows are fixed: a window of length ``w`` starts at a multiple of ``w`` since the Unix
epoch, on the wall clock (money is spent in real time, also on the local runner, whose
simulated clock only stands in for Flink's timers).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from flink_agents._ids import durable_name
from flink_agents.api import (
    Budget,
    BudgetExceededError,
    FlinkAgentsError,
    MemoryObject,
    ModelPrice,
    PlanError,
    TokenUsage,
)
from flink_agents.runtime._metrics import AgentMetrics
from flink_agents.runtime._options import AgentOptions
from flink_agents.runtime.action_log import ActionLog, Spent

logger = logging.getLogger(__name__)

SPEND_PATH = "_flink_agents.spend"
"""Where a key's short-term memory keeps its key budgets' totals: one entry per budget, a
mapping ``{"version": 1, "window_start_ms", "tokens", "cost", "calls"}``."""

FORMAT_VERSION = 1
"""The version of what budgets keep: a key budget's totals in memory, ``admit``'s verdict in
the action log (``tests/runtime/golden`` holds one of each; a reader refuses a later one)."""

KeyTotals = Mapping[str, Mapping[str, Any]]
"""A key's budget totals as its memory keeps them, by budget name."""

Admitted = dict[str, Any]
"""``SpendGuard.admit``'s verdict, as the action log records it (plain data)."""


def budgets_of(config: Mapping[str, Any], options: AgentOptions) -> tuple[Budget, ...]:
    """An agent's budgets: its plan's (``config.budgets``), then its options', which replace
    those of the same name.

    Raises:
        PlanError: the plan's ``budgets`` is not a list of budgets.
    """
    declared = config.get("budgets") or ()
    if not isinstance(declared, Sequence) or isinstance(declared, str):
        raise PlanError(f"the plan's config.budgets must be a list of budgets, got {declared!r}")
    budgets: dict[str, Budget] = {}
    for entry in declared:
        try:
            budget = Budget.model_validate(entry)
        except ValidationError as error:
            raise PlanError(f"the plan's config.budgets has an invalid budget: {error}") from None
        budgets[budget.name] = budget
    for budget in options.budgets:
        budgets[budget.name] = budget
    return tuple(budgets.values())


class SpendGuard:
    """Checks and charges chat model calls against budgets, for one engine.

    Args:
        budgets: the agent's budgets (the plan's, then the options', by name).
        prices: prices by chat model resource name (the ``model-prices`` option).
        resource_prices: a chat model resource's own ``prices`` (None: none).
        agent: the agent's name: agent budgets' totals are kept under it.
        log: where agent budgets' totals are kept; None: in this process only.
        metrics: where spend is counted.
        clock_ms: the wall clock, in epoch milliseconds.
    """

    def __init__(
        self,
        budgets: Sequence[Budget],
        prices: Mapping[str, ModelPrice],
        resource_prices: Callable[[str], ModelPrice | None],
        agent: str,
        log: ActionLog | None,
        metrics: AgentMetrics,
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.budgets = tuple(budgets)
        self._prices = dict(prices)
        self._resource_prices = resource_prices
        self._agent = agent
        self._log = log
        self._metrics = metrics
        self._clock_ms = clock_ms
        self._local: dict[str, tuple[int, Spent]] = {}
        """Agent budgets' totals without a log: by budget, the window and its totals."""
        self._lock = threading.Lock()
        self._covering: dict[str, tuple[Budget, ...]] = {}

    def covering(self, model: str) -> tuple[Budget, ...]:
        """The budgets that calls of chat model resource ``model`` count against."""
        found = self._covering.get(model)
        if found is None:
            found = self._covering[model] = tuple(b for b in self.budgets if b.covers(model))
        return found

    def price(self, model: str) -> ModelPrice | None:
        """What chat model resource ``model`` costs: the option's price, else its own."""
        return self._prices.get(model) or self._resource_prices(model)

    # -- before a call (a durable call) ----------------------------------------------------

    def key_totals(self, memory: MemoryObject) -> dict[str, dict[str, Any]]:
        """The key budgets' totals the key's short-term memory holds (``admit``'s
        argument: read in the action, recorded with the call)."""
        totals = {}
        for budget in self.budgets:
            if budget.scope == "key":
                kept = memory.get(f"{SPEND_PATH}.{budget.name}")
                if isinstance(kept, dict):
                    totals[budget.name] = kept
        return totals

    @durable_name("flink_agents.runtime:SpendGuard.admit")
    async def admit(self, model: str, tokens: int, key_totals: KeyTotals) -> Admitted:
        """Where a call of about ``tokens`` tokens asked of ``model`` may go: ``model``, or
        where a budget switches it, after waiting for a budget that waits. Agent budgets
        are charged the call's estimate here, atomically in their store, so that calls in
        flight at once (in any subtask sharing it) cannot all pass one check; ``charge``
        settles the difference, ``release`` gives it back if the call fails.

        Returns:
            ``{"version": 1, "model": ..., "tokens": ..., "reserved": [[budget,
            window_start_ms, cost], ...]}``: plain data, recorded in the action log as the
            call's result.

        Raises:
            BudgetExceededError: over a budget that fails, or a call larger than a whole
                window allows.
            FlinkAgentsError: a budget limits cost and the model has no price, or
                switching goes in a circle.
        """
        import asyncio  # (here: an operator without budgets never loads it)

        switched: list[str] = []
        while True:
            over = await self._first_over(model, tokens, key_totals)
            if over is None:
                reserved, over = await self._reserve(model, tokens)
                if over is None:
                    return {
                        "version": FORMAT_VERSION,
                        "model": model,
                        "tokens": tokens,
                        "reserved": reserved,
                    }
            budget, spent, end_ms = over
            self._metrics.budget_exceeded(budget.name)
            if budget.on_exceeded == "switch":
                switched.append(model)
                model = budget.switch_to or model
                if model in switched:
                    raise FlinkAgentsError(
                        f"budgets switch chat models in a circle: {' -> '.join(switched)} -> "
                        f"{model}, and every one is over a budget"
                    )
                continue
            if budget.on_exceeded == "wait" and spent != Spent():
                delay_ms = end_ms - self._clock_ms()
                logger.info(
                    "budget %r is spent until its window ends in %.1fs: the call to %r waits",
                    budget.name,
                    delay_ms / 1000,
                    model,
                )
                await asyncio.sleep(max(delay_ms, 0) / 1000)
                continue
            raise BudgetExceededError(
                _over_message(budget, model, spent, tokens, end_ms),
                budget=budget.name,
                model=model,
                window_end_ms=end_ms,
            )

    async def _reserve(
        self, model: str, tokens: int
    ) -> tuple[list[list[Any]], tuple[Budget, Spent, int] | None]:
        """Charge the agent budgets covering ``model`` a call's estimate: what was
        reserved, or (all given back) the first budget another call took the room of."""
        budgets = [b for b in self.covering(model) if b.scope == "agent"]
        if not budgets:
            return [], None
        import asyncio

        price = self.price(model)
        estimate = Spent(tokens, _estimated_cost(price, tokens), 1)
        return await asyncio.to_thread(self._reserve_in_store, budgets, estimate)

    def _reserve_in_store(
        self, budgets: list[Budget], estimate: Spent
    ) -> tuple[list[list[Any]], tuple[Budget, Spent, int] | None]:
        reserved: list[tuple[Budget, int]] = []
        for budget in budgets:
            start = budget.window_start(self._clock_ms())
            total = self._add_agent_spend(budget, start, estimate)
            if _over(budget, total - estimate, estimate.tokens, estimate.cost):
                for taken, taken_start in [*reserved, (budget, start)]:
                    self._add_agent_spend(taken, taken_start, Spent() - estimate)
                return [], (budget, total - estimate, start + budget.window_ms)
            reserved.append((budget, start))
        return [[b.name, start, estimate.cost] for b, start in reserved], None

    async def _first_over(
        self, model: str, tokens: int, key_totals: KeyTotals
    ) -> tuple[Budget, Spent, int] | None:
        """The first budget covering ``model`` that the call would go over, with what its
        window spent and when the window ends; None: within all of them."""
        import asyncio

        price = None
        for budget in self.covering(model):
            start = budget.window_start(self._clock_ms())
            if budget.scope == "key":
                spent = _spent_in(key_totals.get(budget.name), start)
            else:
                spent = await asyncio.to_thread(self._agent_spent, budget, start)
            if budget.max_cost is not None and price is None:
                price = self.price(model)
                if price is None:
                    raise FlinkAgentsError(
                        f"budget {budget.name!r} limits cost, and chat model {model!r} has no "
                        "price: give the resource prices= or set the model-prices option"
                    )
            if _over(budget, spent, tokens, _estimated_cost(price, tokens)):
                return budget, spent, start + budget.window_ms
        return None

    def _agent_spent(self, budget: Budget, start: int) -> Spent:
        if self._log is not None:
            return self._log.spend(self._scope(budget), start)
        with self._lock:
            window, spent = self._local.get(budget.name, (start, Spent()))
        return spent if window == start else Spent()

    # -- after a call ----------------------------------------------------------------------

    def charge(
        self,
        memory: Callable[[], MemoryObject],
        model: str,
        usage: TokenUsage,
        ran: bool,
        admitted: Admitted | None = None,
    ) -> None:
        """Charge a call of ``model`` that used ``usage``: to the key's budgets in its
        short-term ``memory()`` (always: the action's writes are applied once), and, if it
        ``ran`` (not answered from the action log), to the agent's budgets, settling what
        ``admit`` reserved, and to the metrics."""
        price = self.price(model)
        cost = price.cost(usage) if price is not None else 0.0
        if ran:
            self._metrics.chat_cost(model, cost)
        spent = Spent(usage.total_tokens, cost, 1)
        reserved = _reservations(admitted)
        now_ms = self._clock_ms()
        for budget in self.covering(model):
            if ran:
                self._metrics.budget_charged(budget.name, spent)
            start = budget.window_start(now_ms)
            if budget.scope == "key":
                path = f"{SPEND_PATH}.{budget.name}"
                short_term = memory()
                total = _spent_in(short_term.get(path), start) + spent
                short_term.set(path, _kept(start, total))
            elif ran:
                taken = reserved.get(budget.name)
                if taken is not None:  # settled in the window it was reserved in
                    start, estimate = taken
                    total = self._add_agent_spend(budget, start, spent - estimate)
                else:
                    total = self._add_agent_spend(budget, start, spent)
                self._metrics.budget_spent(budget, total)

    def release(self, admitted: Admitted) -> None:
        """Give back what ``admit`` reserved for a call that failed (and cost nothing)."""
        budgets = {budget.name: budget for budget in self.budgets}
        for name, (start, estimate) in _reservations(admitted).items():
            if name in budgets:
                self._add_agent_spend(budgets[name], start, Spent() - estimate)

    def _add_agent_spend(self, budget: Budget, start: int, spent: Spent) -> Spent:
        if self._log is not None:
            return self._log.add_spend(self._scope(budget), start, spent)
        with self._lock:
            window, kept = self._local.get(budget.name, (start, Spent()))
            total = (kept if window == start else Spent()) + spent
            self._local[budget.name] = (start, total)
        return total

    def _scope(self, budget: Budget) -> str:
        return f"{self._agent}/{budget.name}"


def _reservations(admitted: Admitted | None) -> dict[str, tuple[int, Spent]]:
    """What ``admit`` reserved, by agent budget: the window and the estimate."""
    if not admitted:
        return {}
    _check_version(admitted, "a budgets' verdict in the action log")
    tokens = int(admitted.get("tokens", 0))
    return {
        name: (int(start), Spent(tokens, float(cost), 1))
        for name, start, cost in admitted.get("reserved", ())
    }


def _spent_in(kept: Any, start: int) -> Spent:
    """What a key's kept totals hold for the window starting at ``start`` (an older
    window's: nothing)."""
    if not isinstance(kept, Mapping):
        return Spent()
    _check_version(kept, "a key budget's totals in short-term memory")
    if kept.get("window_start_ms") != start:
        return Spent()
    return Spent(
        int(kept.get("tokens", 0)), float(kept.get("cost", 0.0)), int(kept.get("calls", 0))
    )


def _check_version(stored: Mapping[str, Any], what: str) -> None:
    version = stored.get("version")
    if version != FORMAT_VERSION:
        raise FlinkAgentsError(
            f"{what} has format version {version!r}; this release reads version "
            f"{FORMAT_VERSION} (written by a later release?)"
        )


def _kept(start: int, total: Spent) -> dict[str, Any]:
    """A key budget's totals as its memory keeps them (by field name)."""
    return {
        "version": FORMAT_VERSION,
        "window_start_ms": start,
        "tokens": total.tokens,
        "cost": total.cost,
        "calls": total.calls,
    }


def _over(budget: Budget, spent: Spent, tokens: int, cost: float) -> bool:
    """Whether one more call of about ``tokens`` tokens costing about ``cost`` goes over
    ``budget``, which has ``spent`` so far."""
    if budget.max_calls is not None and spent.calls + 1 > budget.max_calls:
        return True
    if budget.max_tokens is not None and spent.tokens + tokens > budget.max_tokens:
        return True
    return budget.max_cost is not None and spent.cost + cost > budget.max_cost


def _estimated_cost(price: ModelPrice | None, tokens: int) -> float:
    """What a call of about ``tokens`` tokens costs before it is made: at the input price
    (its reply is not known yet)."""
    if price is None:
        return 0.0
    return price.cost(TokenUsage(prompt_tokens=tokens, total_tokens=tokens))


def _over_message(budget: Budget, model: str, spent: Spent, tokens: int, end_ms: int) -> str:
    limits = []
    if budget.max_calls is not None:
        limits.append(f"{spent.calls} of {budget.max_calls} calls")
    if budget.max_tokens is not None:
        limits.append(f"{spent.tokens} of {budget.max_tokens} tokens")
    if budget.max_cost is not None:
        limits.append(f"{spent.cost:.6g} of {budget.max_cost:g} in cost")
    window = f"{budget.window.total_seconds():g}s"
    whole = " (more than a whole window allows)" if spent == Spent() else ""
    return (
        f"a call of about {tokens} tokens to chat model {model!r} would go over "
        f"{budget.scope} budget {budget.name!r}{whole}: spent {', '.join(limits)} in its "
        f"{window} window, which ends at {end_ms} ms since the epoch"
    )
