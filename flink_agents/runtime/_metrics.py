"""The in-process metric tree behind ``ctx.agent_metric_group`` and the built-in metrics.

Every runner counts in Python: a built-in counter on the operator thread is a plain integer
attribute, so counting costs about what ``x += 1`` costs. The Flink runner mirrors the tree
into PyFlink's metric groups in batches (``runtime.flink._metrics.FlinkMetricsMirror``),
because in PyFlink's thread mode every ``counter.inc`` is a call into the JVM; the local
runner prints it (``AgentMetrics.render``) when the run ends.

Threads: counters the run lifecycle updates on the operator thread take no lock. What
executor threads touch (durable calls: their counts and latency histograms) and what user
code touches (custom metrics, which an action may update from a durable call's function)
takes a lock per update.

Names follow Apache Flink Agents where one exists (``numOfEventProcessed``,
``numOfActionsExecuted``, ``action.<name>.numOfActionsExecuted``,
``model.<name>.promptTokens``); ``docs/observability.md`` lists every one.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from flink_agents.api import (
    Budget,
    Counter,
    Gauge,
    Histogram,
    HistogramStatistics,
    Meter,
    MetricGroup,
)

if TYPE_CHECKING:
    from flink_agents.runtime.action_log import Spent

METER_WINDOW_S = 60.0
"""A meter's rate is over about this many seconds (Flink's ``MeterView`` default)."""

_EMPTY_STATISTICS = HistogramStatistics(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


class FastCounter(Counter):
    """A counter without a lock, for one updating thread (the operator's)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def inc(self, n: int = 1) -> None:
        self.count += n

    def dec(self, n: int = 1) -> None:
        self.count -= n

    def get_count(self) -> int:
        return self.count


class SharedCounter(FastCounter):
    """A counter any thread may update."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def inc(self, n: int = 1) -> None:
        with self._lock:
            self.count += n

    def dec(self, n: int = 1) -> None:
        with self._lock:
            self.count -= n


class WindowMeter(Meter):
    """Counts events; the rate is computed when read, from the counts seen at earlier
    reads within the window (readers call it a few times a second: the Flink mirror's
    flush, the local runner's table). ``source`` makes it a view of a counter's count, so
    a built-in ``...PerSec`` meter costs nothing beyond its counter."""

    def __init__(
        self, source: FastCounter | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._counter = source if source is not None else SharedCounter()
        self._clock = clock
        self._samples: deque[tuple[float, int]] = deque([(clock(), self._counter.count)])

    def mark(self, n: int = 1) -> None:
        self._counter.inc(n)

    def get_count(self) -> int:
        return self._counter.count

    def get_rate(self) -> float:
        now, count = self._clock(), self._counter.count
        samples = self._samples
        while len(samples) > 1 and now - samples[1][0] >= METER_WINDOW_S:
            samples.popleft()
        first_time, first_count = samples[0]
        if now - samples[-1][0] >= 1.0:
            samples.append((now, count))
        elapsed = now - first_time
        return (count - first_count) / elapsed if elapsed > 0 else 0.0


class WindowHistogram(Histogram):
    """Keeps the latest ``window_size`` values (a sliding window, like Flink's
    ``DescriptiveStatisticsHistogram``); statistics are computed when read."""

    def __init__(self, window_size: int = 1000) -> None:
        if window_size < 1:
            raise ValueError(f"window_size must be positive, got {window_size}")
        self._values: deque[float] = deque(maxlen=window_size)
        self._count = 0
        self._lock = threading.Lock()

    def update(self, value: float) -> None:
        with self._lock:
            self._values.append(value)
            self._count += 1

    def get_count(self) -> int:
        return self._count

    def get_statistics(self) -> HistogramStatistics:
        with self._lock:
            values = sorted(self._values)
            count = self._count
        if not values:
            return _EMPTY_STATISTICS
        return HistogramStatistics(
            count=count,
            min=values[0],
            max=values[-1],
            mean=math.fsum(values) / len(values),
            p50=_percentile(values, 0.50),
            p95=_percentile(values, 0.95),
            p99=_percentile(values, 0.99),
        )


def _percentile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile of sorted values, interpolated between the nearest ranks."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class ValueGauge(Gauge):
    """A gauge holding the last value set; with ``source``, the value is read from it
    (the built-in gauges: parked runs, in-flight calls)."""

    __slots__ = ("_source", "_value")

    def __init__(self, source: Callable[[], float] | None = None) -> None:
        self._source = source
        self._value: float | None = None

    def update(self, value: float) -> None:
        self._value = value

    def get_value(self) -> float | None:
        return self._source() if self._source is not None else self._value


Metric = FastCounter | WindowMeter | WindowHistogram | ValueGauge


class MetricNode(MetricGroup):
    """One group of the tree. ``path`` is its place as ``(name, value)`` parts: value None
    for a plain sub-group (``get_sub_group``), a string for a key-value group such as
    ``("action", "summarize")``, which Flink reporters turn into a label.

    Every metric and group is also listed, in creation order, in the tree's ``registry``,
    so a reader (the Flink mirror) finds what was added since it last looked without
    walking the tree.
    """

    def __init__(self, registry: Registry, path: tuple[tuple[str, str | None], ...]) -> None:
        self.registry = registry
        self.path = path
        self._groups: dict[tuple[str, str | None], MetricNode] = {}
        self._metrics: dict[str, Metric] = {}

    # -- the user-facing MetricGroup -------------------------------------------------------

    def get_sub_group(self, name: str) -> MetricNode:
        return self.group(name)

    def get_counter(self, name: str) -> Counter:
        return self._get(name, SharedCounter)

    def get_meter(self, name: str) -> Meter:
        return self._get(name, WindowMeter)

    def get_histogram(self, name: str, window_size: int = 1000) -> Histogram:
        return self._get(name, lambda: WindowHistogram(window_size))

    def get_gauge(self, name: str) -> Gauge:
        return self._get(name, ValueGauge)

    # -- the runtime's side ----------------------------------------------------------------

    def group(self, name: str, value: str | None = None) -> MetricNode:
        """The sub-group ``name`` (or the key-value group ``name`` = ``value``)."""
        part = (_check_name(name), None if value is None else str(value))
        node = self._groups.get(part)
        if node is None:
            with self.registry.lock:
                node = self._groups.get(part)
                if node is None:
                    node = MetricNode(self.registry, (*self.path, part))
                    self._groups[part] = node
        return node

    def fast_counter(self, name: str) -> FastCounter:
        """A lock-free counter: only for the operator thread."""
        return self._get(name, FastCounter)

    def shared_counter(self, name: str) -> SharedCounter:
        return self._get(name, SharedCounter)

    def meter_of(self, name: str, counter: FastCounter) -> WindowMeter:
        """A meter reading ``counter``'s count (a ``...PerSec`` view of it)."""
        return self._get(name, lambda: WindowMeter(source=counter))

    def gauge_of(self, name: str, source: Callable[[], float]) -> ValueGauge:
        """A gauge whose value is ``source()`` (called by readers, on their thread); an
        existing one reads the new ``source`` from now on (a restored runner's new driver)."""
        gauge = self._get(name, lambda: ValueGauge(source))
        gauge._source = source
        return gauge

    def histogram(self, name: str, window_size: int = 1000) -> WindowHistogram:
        return self._get(name, lambda: WindowHistogram(window_size))

    def _get(self, name: str, make: Callable[[], Any]) -> Any:
        metric = self._metrics.get(name)
        if metric is None:
            with self.registry.lock:
                metric = self._metrics.get(name)
                if metric is None:
                    metric = make()
                    self._metrics[_check_name(name)] = metric
                    self.registry.entries.append((self, name, metric))
        expected = _KINDS[type(metric)]
        wanted = _kind_of(make)
        if wanted is not None and wanted != expected:
            raise ValueError(f"metric {self.identifier(name)!r} is a {expected}, not a {wanted}")
        return metric

    def identifier(self, name: str) -> str:
        """The metric's dotted name below the agent's group (``action.x.numOfActionsExecuted``)."""
        parts = [p for name_value in self.path for p in name_value if p is not None]
        return ".".join([*parts, name])


_KINDS: dict[type, str] = {
    FastCounter: "counter",
    SharedCounter: "counter",
    WindowMeter: "meter",
    WindowHistogram: "histogram",
    ValueGauge: "gauge",
}


def _kind_of(make: Callable[[], Any]) -> str | None:
    return _KINDS.get(make) if isinstance(make, type) else None


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name or "." in name:
        raise ValueError(f"a metric or group name is a non-empty string without dots: {name!r}")
    return name


class Registry:
    """Everything created in one tree, in creation order: ``(group, name, metric)``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: list[tuple[MetricNode, str, Metric]] = []


class AgentMetrics:
    """The metrics of one agent operator (one subtask on Flink, the whole local run).

    The run lifecycle calls its named methods; ``agent_group`` is ``ctx.agent_metric_group``
    and ``action_group(name)`` is ``ctx.action_metric_group``. Methods meant for the
    operator thread say so; the others may be called from any thread.
    """

    def __init__(self) -> None:
        self.registry = Registry()
        self.agent_group = MetricNode(self.registry, ())
        group = self.agent_group
        self._events = group.fast_counter("numOfEventProcessed")
        group.meter_of("numOfEventProcessedPerSec", self._events)
        self._actions = group.fast_counter("numOfActionsExecuted")
        group.meter_of("numOfActionsExecutedPerSec", self._actions)
        self._runs_started = group.fast_counter("numOfInputRunsStarted")
        self._runs_succeeded = group.fast_counter("numOfInputRunsSucceeded")
        self._runs_failed = group.fast_counter("numOfInputRunsFailed")
        self._runs_to_error_output = group.fast_counter("numOfInputRunsToErrorOutput")
        self._inputs_rejected = group.fast_counter("numOfInputsRejected")
        self._actions_replayed = group.fast_counter("numOfActionsReplayed")
        self._actions_retried = group.fast_counter("numOfActionRetries")
        self._calls = group.shared_counter("numOfDurableCalls")
        self._calls_failed = group.shared_counter("numOfDurableCallsFailed")
        self._calls_replayed = group.shared_counter("numOfDurableCallsReplayed")
        self._log_writes = group.shared_counter("numOfActionLogWrites")
        self._log_pruned = group.shared_counter("numOfActionLogRecordsPruned")
        self._ltm_adds = group.shared_counter("numOfLongTermMemoryAdds")
        self._ltm_searches = group.shared_counter("numOfLongTermMemorySearches")
        self._ltm_compactions = group.shared_counter("numOfLongTermMemoryCompactions")
        self._scheduled = group.fast_counter("numOfEventsScheduled")
        self._unscheduled = group.fast_counter("numOfScheduledEventsCancelled")
        self._fired = group.fast_counter("numOfScheduledEventsFired")
        self._set_aside = group.fast_counter("numOfSleeps")
        self._woken = group.fast_counter("numOfRunsWoken")
        self._waits = group.fast_counter("numOfWaits")
        self._answered = group.fast_counter("numOfWaitsAnswered")
        self._timed_out = group.fast_counter("numOfWaitsTimedOut")
        self._signals = group.fast_counter("numOfSignals")
        self._forgotten = group.fast_counter("numOfKeysForgotten")
        self._expired = group.fast_counter("numOfShortTermMemoriesExpired")
        self._per_action: dict[str, FastCounter] = {}
        self._per_function: dict[str, tuple[SharedCounter, SharedCounter, WindowHistogram]] = {}
        self._per_model: dict[str, tuple[SharedCounter, ...]] = {}
        self._per_budget: dict[str, tuple[SharedCounter, ...]] = {}

    # -- runs, actions, events (operator thread) -------------------------------------------

    def run_started(self, input_events: int = 0) -> None:
        """A run started; ``input_events``: its input event processed too (1), at once."""
        self._runs_started.count += 1
        if input_events:
            self._events.count += input_events

    def run_succeeded(self) -> None:
        self._runs_succeeded.count += 1

    def run_failed(self) -> None:
        """A run given up after an action failed (whatever the error policy does next)."""
        self._runs_failed.count += 1

    def run_to_error_output(self) -> None:
        """A failed run's record went to the error output."""
        self._runs_to_error_output.count += 1

    def input_rejected(self) -> None:
        """A record never became a run (its key could not be taken)."""
        self._inputs_rejected.count += 1

    def event_scheduled(self) -> None:
        """An action's ``ctx.schedule`` took effect (or was replayed from the action log)."""
        self._scheduled.count += 1

    def scheduled_event_cancelled(self) -> None:
        self._unscheduled.count += 1

    def scheduled_events_fired(self, n: int) -> None:
        """Scheduled events came due: each starts a run (now, or queued behind the key's)."""
        self._fired.count += n

    def run_set_aside(self, waits: bool) -> None:
        """A run was set aside while its action sleeps (``ctx.sleep``) or, with ``waits``,
        waits for a signal (``ctx.wait_for``)."""
        (self._waits if waits else self._set_aside).count += 1

    def run_woken(self) -> None:
        """A run set aside by a sleep or a wait resumed."""
        self._woken.count += 1

    def signal_received(self, answered: bool) -> None:
        """A signal came for a key; ``answered``: a waiting run took it as its answer."""
        self._signals.count += 1
        if answered:
            self._answered.count += 1

    def key_forgotten(self) -> None:
        """A key was erased on request (``ForgetKey``)."""
        self._forgotten.count += 1

    def short_term_memory_expired(self) -> None:
        """A key's short-term memory expired (``short-term-memory-ttl``)."""
        self._expired.count += 1

    def wait_timed_out(self) -> None:
        """A run waiting for a signal resumed at its timeout, without one."""
        self._timed_out.count += 1

    def event_processed(self, n: int = 1) -> None:
        self._events.count += n

    def action_executed(self, action: str) -> None:
        """An action completed (executed or replayed from the action log)."""
        self._actions.count += 1
        counter = self._per_action.get(action)
        if counter is None:
            counter = self.action_group(action).fast_counter("numOfActionsExecuted")
            self._per_action[action] = counter
        counter.count += 1

    def action_completed(self, action: str, events: int, replayed: bool) -> None:
        """An action completed (or was replayed) and sent ``events`` events."""
        counter = self._per_action.get(action)
        if counter is None:
            self.action_executed(action)  # makes the action's counter
        else:  # ``action_executed``, inlined: twice per record of a two-action agent
            self._actions.count += 1
            counter.count += 1
        self._events.count += events
        if replayed:
            self._actions_replayed.count += 1

    def action_replayed(self) -> None:
        """An action's record was replayed from the action log instead of running it."""
        self._actions_replayed.count += 1

    def action_retried(self) -> None:
        """A failed action is to be retried (error policy ``retry``)."""
        self._actions_retried.count += 1

    def action_group(self, action: str) -> MetricNode:
        """``ctx.action_metric_group`` of ``action``: ``action.<name>`` under the agent's group."""
        return self.agent_group.group("action", action)

    # -- durable calls and the action log (any thread) -------------------------------------

    def durable_call(self, function: str, duration_ms: float, failed: bool = False) -> None:
        """A durable call ran (was not answered from the log) and took ``duration_ms``."""
        calls, failures, latency = self._function(function)
        self._calls.inc()
        calls.inc()
        if failed:
            self._calls_failed.inc()
            failures.inc()
        latency.update(duration_ms)

    def timed_call(
        self, function_name: str, function: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        """``function(*args, **kwargs)``, counted and timed as a durable call."""
        start = time.perf_counter()
        failed = True
        try:
            result = function(*args, **kwargs)
            failed = False
            return result
        finally:
            self.durable_call(function_name, (time.perf_counter() - start) * 1000.0, failed)

    def durable_call_replayed(self, n: int = 1) -> None:
        """A durable call was answered from the action log instead of calling again."""
        self._calls_replayed.inc(n)

    def log_written(self, n: int = 1) -> None:
        """Records (or recorded calls) written to the action log."""
        self._log_writes.inc(n)

    def log_pruned(self, n: int) -> None:
        """Records the action log's retention pruned."""
        if n:
            self._log_pruned.inc(n)

    def _function(self, function: str) -> tuple[SharedCounter, SharedCounter, WindowHistogram]:
        entry = self._per_function.get(function)
        if entry is None:
            group = self.agent_group.group("function", function)
            entry = (
                group.shared_counter("numOfDurableCalls"),
                group.shared_counter("numOfDurableCallsFailed"),
                group.histogram("durableCallLatencyMs"),
            )
            self._per_function[function] = entry
        return entry

    # -- gauges ----------------------------------------------------------------------------

    def watch(self, parked_runs: Callable[[], int], in_flight_calls: Callable[[], int]) -> None:
        """Report the number of parked runs and of durable calls in flight as gauges; the
        callables are read by the reporters' reader (on the operator thread on Flink)."""
        self.agent_group.gauge_of("numOfParkedRuns", parked_runs)
        self.agent_group.gauge_of("numOfInFlightCalls", in_flight_calls)

    # -- long-term memory (any thread) -----------------------------------------------------

    def long_term_memory_added(self, n: int = 1) -> None:
        self._ltm_adds.inc(n)

    def long_term_memory_searched(self) -> None:
        self._ltm_searches.inc()

    def long_term_memory_compacted(self) -> None:
        """One compaction pass finished."""
        self._ltm_compactions.inc()

    # -- chat models (any thread) ----------------------------------------------------------

    def chat_request(
        self, model: str, prompt_tokens: int = 0, completion_tokens: int = 0, retries: int = 0
    ) -> None:
        """A chat model answered: its token usage and the retries it needed."""
        requests, prompt, completion, retried, *_ = self._model(model)
        requests.inc()
        if prompt_tokens:
            prompt.inc(prompt_tokens)
        if completion_tokens:
            completion.inc(completion_tokens)
        if retries:
            retried.inc(retries)

    def chat_cost(self, model: str, cost: float) -> None:
        """What a chat model's call cost, by its price (in millionths)."""
        if cost:
            self._model(model)[5].inc(round(cost * 1_000_000))

    def budget_exceeded(self, budget: str) -> None:
        """A call was found over a budget (it failed, switched or waited)."""
        self._budget(budget)[0].inc()

    def budget_charged(self, budget: str, spent: Spent) -> None:
        """A call that ran was charged to a budget (for a key budget: by one of the keys of
        this subtask's key groups)."""
        _, calls, tokens, cost = self._budget(budget)
        calls.inc(spent.calls)
        if spent.tokens:
            tokens.inc(spent.tokens)
        if spent.cost:
            cost.inc(round(spent.cost * 1_000_000))

    def tracing(self, tracer: Any) -> None:
        """Gauges of the spans ``tracer`` (a ``Tracer``) exported and dropped."""
        group = self.agent_group.group("tracing")
        group.gauge_of("numOfSpans", lambda: tracer.exported)
        group.gauge_of("numOfSpansDropped", tracer.dropped)

    def budget_spent(self, budget: Budget, spent: Spent) -> None:
        """An agent budget's window has ``spent`` so far: its remaining gauges."""
        group = self.agent_group.group("budget", budget.name)
        for name, limit, used, scale in (
            ("remainingCalls", budget.max_calls, spent.calls, 1),
            ("remainingTokens", budget.max_tokens, spent.tokens, 1),
            ("remainingCostMicros", budget.max_cost, spent.cost, 1_000_000),
        ):
            if limit is not None:
                group.get_gauge(name).update(max(0, round((limit - used) * scale)))

    def _budget(self, budget: str) -> tuple[SharedCounter, ...]:
        counters = self._per_budget.get(budget)
        if counters is None:
            group = self.agent_group.group("budget", budget)
            counters = tuple(
                group.shared_counter(name)
                for name in ("numOfExceeded", "spentCalls", "spentTokens", "spentCostMicros")
            )
            self._per_budget[budget] = counters
        return counters

    def chat_fallback(self, model: str) -> None:
        """A chat model failed for good and the request went on to its fallback."""
        self._model(model)[4].inc()

    def _model(self, model: str) -> tuple[SharedCounter, ...]:
        entry = self._per_model.get(model)
        if entry is None:
            group = self.agent_group.group("model", model)
            entry = tuple(
                group.shared_counter(name)
                for name in (
                    "numOfRequests",
                    "promptTokens",
                    "completionTokens",
                    "numOfRetries",
                    "numOfFallbacks",
                    "costMicros",
                )
            )
            self._per_model[model] = entry
        return entry

    # -- reading ---------------------------------------------------------------------------

    def entries(self) -> Iterator[tuple[str, Metric]]:
        """Every metric with its dotted name, in creation order."""
        for group, name, metric in list(self.registry.entries):
            yield group.identifier(name), metric

    def snapshot(self) -> dict[str, float | int | None]:
        """Every value by dotted name: a counter's count, a meter's rate (and ``.count``),
        a gauge's value, a histogram's ``.count``/``.min``/``.max``/``.mean``/``.p50``/
        ``.p95``/``.p99``."""
        values: dict[str, float | int | None] = {}
        for name, metric in self.entries():
            values.update(flatten(name, metric))
        return values

    def render(self, title: str = "Agent metrics") -> Any:
        """A ``rich`` table of every metric that has a value (what the local runner prints)."""
        from rich.table import Table

        table = Table(title=title)
        table.add_column("metric")
        table.add_column("value", justify="right")
        for name, value in self.snapshot().items():
            if value is None or (value == 0 and not name.endswith(_ALWAYS_SHOWN)):
                continue
            table.add_row(name, _format(value))
        return table


_ALWAYS_SHOWN = ("numOfEventProcessed", "numOfActionsExecuted", "numOfInputRunsStarted")


def flatten(name: str, metric: Metric) -> Iterator[tuple[str, float | int | None]]:
    """A metric's values under flat names (see ``AgentMetrics.snapshot``)."""
    if isinstance(metric, FastCounter):
        yield name, metric.count
    elif isinstance(metric, WindowMeter):
        yield name, metric.get_rate()
        yield f"{name}.count", metric.get_count()
    elif isinstance(metric, WindowHistogram):
        statistics = metric.get_statistics()
        for field in HISTOGRAM_FIELDS:
            yield f"{name}.{field}", getattr(statistics, field)
    else:
        yield name, metric.get_value()


HISTOGRAM_FIELDS = ("count", "min", "max", "mean", "p50", "p95", "p99")


def _format(value: float | int) -> str:
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.2f}"
