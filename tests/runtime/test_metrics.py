"""The in-process metric tree (``runtime._metrics``) and its mirror into PyFlink's metric
groups (``runtime.flink._metrics``), the latter over recording stand-ins of PyFlink's groups
(the real ones are exercised by ``tests/runtime/flink/test_metrics_reporter.py``)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from rich.console import Console

from flink_agents.api import Counter, Gauge, Histogram, Meter, MetricGroup
from flink_agents.runtime._metrics import AgentMetrics, WindowHistogram, WindowMeter
from flink_agents.runtime.flink._metrics import FlinkMetricsMirror

# --- the tree -----------------------------------------------------------------------------


def test_builtin_metrics_have_apache_flink_agents_names():
    metrics = AgentMetrics()
    metrics.run_started()
    metrics.event_processed(3)
    metrics.action_executed("plan")
    metrics.action_executed("plan")
    metrics.action_executed("reply")
    metrics.action_replayed()
    metrics.run_succeeded()
    snapshot = metrics.snapshot()
    assert snapshot["numOfEventProcessed"] == 3
    assert snapshot["numOfActionsExecuted"] == 3
    assert snapshot["action.plan.numOfActionsExecuted"] == 2
    assert snapshot["action.reply.numOfActionsExecuted"] == 1
    assert snapshot["numOfActionsReplayed"] == 1
    assert snapshot["numOfInputRunsStarted"] == snapshot["numOfInputRunsSucceeded"] == 1
    assert snapshot["numOfEventProcessedPerSec.count"] == 3


def test_run_outcomes_durable_calls_log_and_long_term_memory_are_counted():
    metrics = AgentMetrics()
    metrics.run_failed()
    metrics.run_to_error_output()
    metrics.input_rejected()
    metrics.action_retried()
    metrics.durable_call("search", 5.0)
    metrics.durable_call("search", 15.0, failed=True)
    metrics.durable_call_replayed(2)
    metrics.log_written(4)
    metrics.log_pruned(0)
    metrics.log_pruned(7)
    metrics.long_term_memory_added(2)
    metrics.long_term_memory_searched()
    metrics.long_term_memory_compacted()
    snapshot = metrics.snapshot()
    assert {
        name: snapshot[name]
        for name in (
            "numOfInputRunsFailed",
            "numOfInputRunsToErrorOutput",
            "numOfInputsRejected",
            "numOfActionRetries",
            "numOfDurableCalls",
            "numOfDurableCallsFailed",
            "numOfDurableCallsReplayed",
            "numOfActionLogWrites",
            "numOfActionLogRecordsPruned",
            "numOfLongTermMemoryAdds",
            "numOfLongTermMemorySearches",
            "numOfLongTermMemoryCompactions",
            "function.search.numOfDurableCalls",
            "function.search.numOfDurableCallsFailed",
            "function.search.durableCallLatencyMs.count",
            "function.search.durableCallLatencyMs.max",
        )
    } == {
        "numOfInputRunsFailed": 1,
        "numOfInputRunsToErrorOutput": 1,
        "numOfInputsRejected": 1,
        "numOfActionRetries": 1,
        "numOfDurableCalls": 2,
        "numOfDurableCallsFailed": 1,
        "numOfDurableCallsReplayed": 2,
        "numOfActionLogWrites": 4,
        "numOfActionLogRecordsPruned": 7,
        "numOfLongTermMemoryAdds": 2,
        "numOfLongTermMemorySearches": 1,
        "numOfLongTermMemoryCompactions": 1,
        "function.search.numOfDurableCalls": 2,
        "function.search.numOfDurableCallsFailed": 1,
        "function.search.durableCallLatencyMs.count": 2,
        "function.search.durableCallLatencyMs.max": 15.0,
    }


def test_chat_model_tokens_requests_and_retries_per_model():
    metrics = AgentMetrics()
    metrics.chat_request("gpt", prompt_tokens=100, completion_tokens=20)
    metrics.chat_request("gpt", prompt_tokens=50, completion_tokens=5, retries=2)
    metrics.chat_request("small", prompt_tokens=1)
    metrics.chat_fallback("gpt")
    snapshot = metrics.snapshot()
    assert snapshot["model.gpt.promptTokens"] == 150
    assert snapshot["model.gpt.completionTokens"] == 25
    assert snapshot["model.gpt.numOfRequests"] == 2
    assert snapshot["model.gpt.numOfRetries"] == 2
    assert snapshot["model.gpt.numOfFallbacks"] == 1
    assert snapshot["model.small.numOfRequests"] == 1


def test_timed_call_counts_the_call_and_its_failure_and_returns_or_raises():
    metrics = AgentMetrics()
    assert metrics.timed_call("add", lambda a, b: a + b, 1, b=2) == 3
    with pytest.raises(ZeroDivisionError):
        metrics.timed_call("divide", lambda: 1 / 0)
    snapshot = metrics.snapshot()
    assert snapshot["function.add.numOfDurableCalls"] == 1
    assert snapshot["function.add.numOfDurableCallsFailed"] == 0
    assert snapshot["function.divide.numOfDurableCallsFailed"] == 1
    assert snapshot["function.add.durableCallLatencyMs.count"] == 1


def test_gauges_read_their_sources():
    metrics = AgentMetrics()
    parked = [3]
    metrics.watch(lambda: parked[0], lambda: 5)
    assert metrics.snapshot()["numOfParkedRuns"] == 3
    parked[0] = 0
    assert metrics.snapshot()["numOfParkedRuns"] == 0
    assert metrics.snapshot()["numOfInFlightCalls"] == 5


def test_custom_groups_hand_out_one_metric_per_name():
    metrics = AgentMetrics()
    group = metrics.agent_group.get_sub_group("cache")
    assert isinstance(group, MetricGroup)
    counter = group.get_counter("hits")
    assert group.get_counter("hits") is counter
    assert isinstance(counter, Counter)
    counter.inc(5)
    counter.dec()
    meter = group.get_meter("lookups")
    meter.mark(2)
    assert isinstance(meter, Meter)
    histogram = group.get_histogram("sizes")
    assert isinstance(histogram, Histogram)
    histogram.update(10)
    gauge = group.get_gauge("ratio")
    assert isinstance(gauge, Gauge)
    assert gauge.get_value() is None
    gauge.update(0.5)
    metrics.action_group("act").get_counter("mine").inc()
    snapshot = metrics.snapshot()
    assert snapshot["cache.hits"] == 4
    assert snapshot["cache.lookups.count"] == 2
    assert snapshot["cache.sizes.p50"] == 10
    assert snapshot["cache.ratio"] == 0.5
    assert snapshot["action.act.mine"] == 1


def test_a_name_keeps_its_kind_and_names_have_no_dots():
    group = AgentMetrics().agent_group
    group.get_counter("x")
    with pytest.raises(ValueError, match="is a counter, not a gauge"):
        group.get_gauge("x")
    with pytest.raises(ValueError, match="without dots"):
        group.get_counter("a.b")
    with pytest.raises(ValueError, match="without dots"):
        group.get_sub_group("")


def test_histogram_statistics_over_its_window():
    histogram = WindowHistogram(window_size=100)
    assert histogram.get_statistics().count == 0
    for value in range(1, 201):  # the window keeps 101..200
        histogram.update(value)
    statistics = histogram.get_statistics()
    assert statistics.count == 200
    assert (statistics.min, statistics.max) == (101, 200)
    assert statistics.mean == pytest.approx(150.5)
    assert statistics.p50 == pytest.approx(150.5)
    assert statistics.p95 == pytest.approx(195.05)
    assert statistics.p99 == pytest.approx(199.01)
    with pytest.raises(ValueError):
        WindowHistogram(window_size=0)


def test_meter_rate_over_a_simulated_clock_read_every_second():
    now = [0.0]
    meter = WindowMeter(clock=lambda: now[0])
    for second in range(1, 91):  # 2 events a second for 90 s
        now[0] = float(second)
        meter.mark(2)
        rate = meter.get_rate()
    assert rate == pytest.approx(2.0)
    for second in range(91, 161):  # then none for 70 s: the window forgets them
        now[0] = float(second)
        rate = meter.get_rate()
    assert rate == 0.0
    assert meter.get_count() == 180


def test_shared_metrics_lose_no_update_across_threads():
    metrics = AgentMetrics()
    counter = metrics.agent_group.get_counter("n")

    def work(_: int) -> None:
        for _ in range(2000):
            counter.inc()
            metrics.durable_call("f", 1.0)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(8)))
    snapshot = metrics.snapshot()
    assert snapshot["n"] == 16000
    assert snapshot["numOfDurableCalls"] == 16000
    assert snapshot["function.f.durableCallLatencyMs.count"] == 16000


def test_render_lists_what_has_a_value():
    metrics = AgentMetrics()
    metrics.event_processed()
    metrics.chat_request("gpt", prompt_tokens=12)
    console = Console(record=True, width=120)
    console.print(metrics.render())
    text = console.export_text()
    assert "numOfEventProcessed" in text
    assert "model.gpt.promptTokens" in text
    assert "numOfLongTermMemoryAdds" not in text  # zero: left out


# --- the mirror, over stand-ins of PyFlink's metric groups -----------------------------------


class _Recorder:
    """Records every call PyFlink's metric objects would receive."""

    def __init__(self, log: list, path: str) -> None:
        self.log = log
        self.path = path

    def inc(self, n: int = 1) -> None:
        self.log.append(("inc", self.path, n))

    def mark_event(self, n: int = 1) -> None:
        self.log.append(("mark", self.path, n))

    def update(self, value: int) -> None:
        self.log.append(("set", self.path, value))


class FakeGroup:
    """Stands in for a PyFlink MetricGroup; ``embedded`` picks thread mode's flavour."""

    def __init__(self, log: list, path: str = "") -> None:
        self.log = log
        self.path = path
        self.gauges: dict[str, object] = {}

    def add_group(self, name: str, extra: str | None = None) -> FakeGroup:
        suffix = name if extra is None else f"{name}={extra}"
        self.log.append(("group", f"{self.path}/{suffix}"))
        return type(self)(self.log, f"{self.path}/{suffix}")

    def counter(self, name: str) -> _Recorder:
        return _Recorder(self.log, f"{self.path}/{name}")

    def meter(self, name: str, time_span_in_seconds: int = 60) -> _Recorder:
        return _Recorder(self.log, f"{self.path}/{name}")

    def distribution(self, name: str) -> _Recorder:
        return _Recorder(self.log, f"{self.path}/{name}")

    def gauge(self, name: str, obj) -> None:
        self.gauges[f"{self.path}/{name}"] = obj


class ThreadModeGroup(FakeGroup):
    pass


ThreadModeGroup.__module__ = "pyflink.fn_execution.metrics.embedded.metric_impl"


def test_mirror_pushes_counter_deltas_and_registers_new_groups_lazily():
    log: list = []
    metrics = AgentMetrics()
    mirror = FlinkMetricsMirror(metrics, ThreadModeGroup(log))
    assert mirror.thread_mode
    metrics.event_processed(2)
    mirror.flush()
    assert ("inc", "/numOfEventProcessed", 2) in log
    assert ("mark", "/numOfEventProcessedPerSec", 2) in log
    log.clear()
    mirror.flush()
    assert [entry for entry in log if entry[0] != "set"] == []  # nothing changed
    metrics.event_processed()
    metrics.action_executed("reply")  # a key-value group created after the first flush
    metrics.action_group("reply").get_sub_group("mine").get_counter("n").inc(3)
    mirror.flush()
    assert ("inc", "/numOfEventProcessed", 1) in log
    assert ("group", "/action=reply") in log
    assert ("inc", "/action=reply/numOfActionsExecuted", 1) in log
    assert ("inc", "/action=reply/mine/n", 3) in log


def test_mirror_pushes_gauges_and_histograms_as_integers_in_thread_mode():
    log: list = []
    metrics = AgentMetrics()
    metrics.watch(lambda: 4, lambda: 1)
    metrics.durable_call("lookup", 2.4)
    metrics.durable_call("lookup", 3.8)
    mirror = FlinkMetricsMirror(metrics, ThreadModeGroup(log))
    mirror.flush()
    assert ("set", "/numOfParkedRuns", 4) in log
    assert ("set", "/function=lookup/durableCallLatencyMs/count", 2) in log
    assert ("set", "/function=lookup/durableCallLatencyMs/max", 4) in log
    assert ("set", "/function=lookup/durableCallLatencyMs/mean", 3) in log
    log.clear()
    mirror.flush()
    assert log == []  # unchanged values are not sent into the JVM again


def test_mirror_in_process_mode_registers_gauge_callables_that_return_pushed_values():
    log: list = []
    root = FakeGroup(log)
    parked = [2]
    metrics = AgentMetrics()
    metrics.watch(lambda: parked[0], lambda: 0)
    mirror = FlinkMetricsMirror(metrics, root)
    assert not mirror.thread_mode
    mirror.flush()
    read = root.gauges["/numOfParkedRuns"]
    assert read() == 2
    parked[0] = 9
    assert read() == 2  # the callable never reaches into the runtime's objects
    mirror.flush()
    assert read() == 9
    assert ("inc", "/numOfInputRunsFailed", 0) in log  # a Beam counter is reported once touched


def test_maybe_flush_waits_for_its_interval():
    log: list = []
    metrics = AgentMetrics()
    mirror = FlinkMetricsMirror(metrics, ThreadModeGroup(log), interval_ms=60_000)
    mirror.maybe_flush()
    metrics.event_processed()
    log.clear()
    mirror.maybe_flush()  # not due for a minute
    assert log == []
    mirror.flush()
    assert ("inc", "/numOfEventProcessed", 1) in log


def test_mirror_without_a_flink_group_does_nothing():
    metrics = AgentMetrics()
    metrics.event_processed()
    FlinkMetricsMirror(metrics, None).flush()


def test_metrics_created_while_flushing_from_another_thread_are_all_mirrored():
    log: list = []
    metrics = AgentMetrics()
    mirror = FlinkMetricsMirror(metrics, ThreadModeGroup(log))
    stop = threading.Event()

    def create() -> None:
        for i in range(300):
            metrics.durable_call(f"f{i}", 1.0)
        stop.set()

    thread = threading.Thread(target=create)
    thread.start()
    while not stop.is_set():
        mirror.flush()
    thread.join()
    mirror.flush()
    registered = {entry[1] for entry in log if entry[0] == "group"}
    assert {f"/function=f{i}" for i in range(300)} <= registered
