"""Metrics under Apache Flink Agents' module path: ours, with their method names."""

from flink_agents.api._metrics import Counter, Gauge, Histogram, Meter, MetricGroup

__all__ = ["Counter", "Gauge", "Histogram", "Meter", "MetricGroup"]
