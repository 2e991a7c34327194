"""Metrics an action can report: ``ctx.agent_metric_group`` and ``ctx.action_metric_group``.

The runner implements these interfaces. On Flink they reach the job's metric system (and so
every configured reporter: Prometheus, JMX, the web UI) under the agent operator's metric
group; the local runner keeps them in memory and prints them when the run ends. Names follow
Apache Flink Agents: a group hands out counters, meters, histograms and gauges by name, and
asking twice for one name returns the same metric.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass


class Counter(ABC):
    """A count that goes up (and, rarely, down)."""

    @abstractmethod
    def inc(self, n: int = 1) -> None:
        """Add ``n``."""

    @abstractmethod
    def dec(self, n: int = 1) -> None:
        """Subtract ``n``."""

    @abstractmethod
    def get_count(self) -> int:
        """The current count."""


class Meter(ABC):
    """Events and their rate per second (over about the last minute)."""

    @abstractmethod
    def mark(self, n: int = 1) -> None:
        """Record ``n`` events now."""

    @abstractmethod
    def get_count(self) -> int:
        """Events recorded since the meter was created."""

    @abstractmethod
    def get_rate(self) -> float:
        """Events per second over the recent window."""


@dataclass(frozen=True)
class HistogramStatistics:
    """A histogram's summary: ``count`` of every value ever recorded; the others over the
    most recent values it keeps (its window)."""

    count: int
    min: float
    max: float
    mean: float
    p50: float
    p95: float
    p99: float


class Histogram(ABC):
    """A distribution of values (latencies, sizes) summarised over a bounded window."""

    @abstractmethod
    def update(self, value: float) -> None:
        """Record one value."""

    @abstractmethod
    def get_count(self) -> int:
        """Values recorded since the histogram was created."""

    @abstractmethod
    def get_statistics(self) -> HistogramStatistics:
        """Count, min, max, mean and percentiles (zeros while empty)."""

    def get_mean(self) -> float:
        """``get_statistics().mean`` (Apache Flink Agents' name)."""
        return self.get_statistics().mean

    def get_max(self) -> float:
        """``get_statistics().max`` (Apache Flink Agents' name)."""
        return self.get_statistics().max

    def get_min(self) -> float:
        """``get_statistics().min`` (Apache Flink Agents' name)."""
        return self.get_statistics().min


class Gauge(ABC):
    """A value set from time to time; reporters read the latest one."""

    @abstractmethod
    def update(self, value: float) -> None:
        """Set the value."""

    @abstractmethod
    def get_value(self) -> float | None:
        """The latest value (None before the first ``update``)."""


class MetricGroup(ABC):
    """A named container of metrics and further groups.

    On Flink, a group's metrics are reported with the group's path under the agent
    operator's scope (for instance ``<operator>.myGroup.myCounter``). Values reach Flink in
    batches (a few times a second, and when the operator closes), not on every update.
    """

    @abstractmethod
    def get_sub_group(self, name: str) -> MetricGroup:
        """The group ``name`` under this one, created on first use."""

    @abstractmethod
    def get_counter(self, name: str) -> Counter:
        """The counter ``name`` of this group, created on first use."""

    @abstractmethod
    def get_meter(self, name: str) -> Meter:
        """The meter ``name`` of this group, created on first use."""

    @abstractmethod
    def get_histogram(self, name: str, window_size: int = 1000) -> Histogram:
        """The histogram ``name`` of this group, created on first use, summarising its
        latest ``window_size`` values (fixed by the first call)."""

    @abstractmethod
    def get_gauge(self, name: str) -> Gauge:
        """The gauge ``name`` of this group, created on first use."""
