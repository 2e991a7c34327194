"""Mirrors an ``AgentMetrics`` tree into PyFlink's metric system, in batches.

In PyFlink's thread mode a metric update is a call into the JVM (through pemja) and in
process mode a Beam metric update; neither belongs on the per-record path. The run
lifecycle counts in Python (``runtime._metrics``) and the operator calls
``FlinkMetricsMirror.maybe_flush()`` from its callbacks: at most every ``interval_ms`` it
registers the metrics and groups created since the last flush (lazily: custom groups may
appear at any time) and pushes what changed. ``flush()`` at ``close`` pushes the rest.

How each kind reaches Flink:

- a counter: ``counter.inc(delta)`` of what was counted since the last flush;
- a meter: ``meter.mark_event(delta)``; Flink's ``MeterView`` computes the rate;
- a gauge: its value, rounded to an integer (thread mode's gauges are ``Long``);
- a histogram: a sub-group named after it with integer gauges ``count``, ``min``, ``max``,
  ``mean``, ``p50``, ``p95``, ``p99`` (PyFlink has no histogram type).

Gauges are pushed, never pulled. PyFlink's thread-mode ``gauge(name, callable)`` makes the
reporter's own Java thread call back into Python (measured here: the Prometheus reporter
calls it on each scrape, on its HTTP thread), contending for the GIL with the operator
thread and racing the interpreter's shutdown. So in thread mode a gauge is a value holder
inside the JVM (PyFlink's thread-mode ``distribution``, a ``Gauge<Long>`` whose value
``update`` sets) that the flush updates. In process mode PyFlink reads a gauge's callable on
the Python worker's own thread at the end of each bundle, so the callable simply returns the
value the last flush saw.
"""

from __future__ import annotations

import time
from typing import Any

from flink_agents.runtime._metrics import (
    HISTOGRAM_FIELDS,
    AgentMetrics,
    FastCounter,
    MetricNode,
    ValueGauge,
    WindowHistogram,
    WindowMeter,
)

DEFAULT_FLUSH_INTERVAL_MS = 250


class FlinkMetricsMirror:
    """Pushes ``metrics`` into ``flink_group`` (``runtime_context.get_metrics_group()``).

    Call ``maybe_flush()`` from the operator's callbacks (it costs a clock read when not
    due) and ``flush()`` from ``close``; both only on the operator thread. ``flink_group``
    None (process mode with ``python.metric.enabled: false``) makes both do nothing.
    """

    def __init__(
        self,
        metrics: AgentMetrics,
        flink_group: Any,
        interval_ms: int = DEFAULT_FLUSH_INTERVAL_MS,
    ) -> None:
        self._metrics = metrics
        self._root = flink_group
        self._interval_s = interval_ms / 1000.0
        self._due = 0.0
        self._thread_mode = flink_group is not None and _is_thread_mode(flink_group)
        self._groups: dict[tuple[tuple[str, str | None], ...], Any] = {(): flink_group}
        self._seen = 0  # registry entries already registered with Flink
        self._pushers: list[_Pusher] = []

    @property
    def thread_mode(self) -> bool:
        return self._thread_mode

    def maybe_flush(self) -> None:
        """``flush()`` if ``interval_ms`` passed since the last one."""
        now = time.monotonic()
        if now >= self._due:
            self._due = now + self._interval_s
            self.flush()

    def flush(self) -> None:
        """Register new metrics with Flink and push every change since the last flush."""
        if self._root is None:
            return
        entries = self._metrics.registry.entries
        while self._seen < len(entries):
            group, name, metric = entries[self._seen]
            self._pushers.append(self._register(group, name, metric))
            self._seen += 1
        for pusher in self._pushers:
            pusher.push()

    # -- registration ----------------------------------------------------------------------

    def _register(self, node: MetricNode, name: str, metric: Any) -> _Pusher:
        flink_group = self._group(node.path)
        if isinstance(metric, FastCounter):
            flink_counter = flink_group.counter(name)
            if not self._thread_mode:
                flink_counter.inc(0)  # a Beam counter is reported once it has been touched
            return _CounterPusher(metric, flink_counter)
        if isinstance(metric, WindowMeter):
            return _MeterPusher(metric, flink_group.meter(name))
        if isinstance(metric, WindowHistogram):
            histogram_group = flink_group.add_group(name)
            holders = {field: self._gauge(histogram_group, field) for field in HISTOGRAM_FIELDS}
            return _HistogramPusher(metric, holders)
        if isinstance(metric, ValueGauge):
            return _GaugePusher(metric, self._gauge(flink_group, name))
        raise TypeError(f"cannot mirror {type(metric).__name__} {name!r}")

    def _group(self, path: tuple[tuple[str, str | None], ...]) -> Any:
        group = self._groups.get(path)
        if group is None:
            parent = self._group(path[:-1])
            name, value = path[-1]
            group = parent.add_group(name) if value is None else parent.add_group(name, value)
            self._groups[path] = group
        return group

    def _gauge(self, flink_group: Any, name: str) -> _Holder:
        if self._thread_mode:
            return _JvmHolder(flink_group.distribution(name))
        holder = _PythonHolder()
        flink_group.gauge(name, holder.read)
        return holder


def _is_thread_mode(flink_group: Any) -> bool:
    """PyFlink's thread-mode metric groups live in ``...metrics.embedded``."""
    return ".embedded." in type(flink_group).__module__


# -- holders of gauge values ---------------------------------------------------------------


class _Holder:
    def set(self, value: int) -> None:
        raise NotImplementedError


class _JvmHolder(_Holder):
    """Thread mode: a ``Gauge<Long>`` inside the JVM, set through its ``update``."""

    def __init__(self, distribution: Any) -> None:
        self._distribution = distribution
        self._last: int | None = None

    def set(self, value: int) -> None:
        if value != self._last:  # each update is a call into the JVM
            self._distribution.update(value)
            self._last = value


class _PythonHolder(_Holder):
    """Process mode: PyFlink calls ``read`` on the worker's thread at each bundle's end."""

    def __init__(self) -> None:
        self._value = 0

    def set(self, value: int) -> None:
        self._value = value

    def read(self) -> int:
        return self._value


# -- pushers -------------------------------------------------------------------------------


class _Pusher:
    def push(self) -> None:
        raise NotImplementedError


class _CounterPusher(_Pusher):
    def __init__(self, counter: FastCounter, flink_counter: Any) -> None:
        self._counter = counter
        self._flink = flink_counter
        self._pushed = 0

    def push(self) -> None:
        count = self._counter.count
        delta = count - self._pushed
        if delta:
            self._flink.inc(delta)
            self._pushed = count


class _MeterPusher(_Pusher):
    def __init__(self, meter: WindowMeter, flink_meter: Any) -> None:
        self._meter = meter
        self._flink = flink_meter
        self._pushed = 0

    def push(self) -> None:
        count = self._meter.get_count()
        delta = count - self._pushed
        if delta > 0:
            self._flink.mark_event(delta)
            self._pushed = count


class _GaugePusher(_Pusher):
    def __init__(self, gauge: ValueGauge, holder: _Holder) -> None:
        self._gauge = gauge
        self._holder = holder

    def push(self) -> None:
        value = self._gauge.get_value()
        if value is not None:
            self._holder.set(_integer(value))


class _HistogramPusher(_Pusher):
    def __init__(self, histogram: WindowHistogram, holders: dict[str, _Holder]) -> None:
        self._histogram = histogram
        self._holders = holders
        self._count = -1

    def push(self) -> None:
        count = self._histogram.get_count()
        if count == self._count:
            return
        self._count = count
        statistics = self._histogram.get_statistics()
        for field, holder in self._holders.items():
            holder.set(_integer(getattr(statistics, field)))


def _integer(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        return round(float(value))
    except (TypeError, ValueError, OverflowError):
        return 0
