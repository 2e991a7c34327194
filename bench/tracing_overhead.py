"""Benchmark: what tracing (``tracing: otlp``) costs the memory agent on a MiniCluster.

The agent is ``state_throughput``'s (``bench.agents.CounterAgent``: two plain actions per
record, each reading and writing one short-term field; no durable call), with its default
options (the SQLite action log) but for tracing, next to raw PyFlink doing the same state work
(``bench.agents.RawCounter``) in the same run; thread mode, parallelism 1, a discarding sink:

- tracing off (the default): the runtime holds no tracer and makes no span;
- tracing on, no collector: ``tracing: otlp`` towards a loopback port nothing listens on, so
  every export fails and its spans are dropped (the check: how long the job waits for them);
- tracing on, a stand-in collector: a loopback OTLP/HTTP server in this process that answers
  every export at once and only counts its spans (``http/protobuf`` only): tracing's own cost
  when the collector keeps up;
- tracing on, Phoenix: Arize Phoenix (``.venv-phoenix/bin/phoenix serve``, started here on
  loopback; the variant is skipped without it) as the collector, on the same cores as the job.

With tracing on, each run of this agent makes three spans (the run and its two actions), handed
to the OpenTelemetry SDK's batch processor, which exports them from a thread of its own; and
its runs leave the plain lane for ``step``'s path, which times each action. The operator's
close flushes the processor's queue (the SDK's shutdown, which gives up after 30 s); with no
collector each batch's export retries until the exporter's timeout, so the figure of that
variant holds the wait at the job's end.

Each round runs an empty job (source -> sink) first, then the others in a shuffled order;
medians over the rounds, net of the empty job, as ``state_throughput`` reports them. CPU is
this process's and the MiniCluster JVM's (Python runs inside the JVM in thread mode), less
Phoenix's own, which is shown apart.

Spans: the gauges ``tracing.numOfSpans`` and ``tracing.numOfSpansDropped`` live in the Python
worker, inside the JVM in thread mode, and reach only Flink's metric reporters, which would
have to be scraped while the job runs (as ``tests/runtime/flink/test_agent_metrics.py`` does);
this bench does not. It counts instead the spans that reached the collector: those the
stand-in received, and those Phoenix stored from each job (its GraphQL ``recordCount``, once
Phoenix has stopped ingesting), against the three per record the job made. With no collector
every span is dropped, by construction. Phoenix ingests a few hundred spans
a second on two cores and queues at most 20,000 (``PHOENIX_MAX_SPANS_QUEUE_SIZE``; past that it
answers 503, and the exporter retries); the bench waits for it to finish after each of its
jobs, so that it takes no CPU from the next one: most of the bench's time.

Last, tracing off's cost on the hot path, counted rather than timed: on the local runner, a
line tracer counts the tracer checks (source lines holding ``tracer is not None``) executed per
record, for this agent and for one making a durable call, and the lines of the tracing modules
run at all; ``timeit`` gives what one such check costs.

    PYTHONPATH=$PWD .venv/bin/python -m bench.tracing_overhead [--records 20000 --repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import linecache
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import timeit
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import agents
from bench._common import (
    Timing,
    counter_agent_stream,
    discard,
    enable_thread_mode,
    machine_summary,
    make_env,
    raw_counter_stream,
    record_figure,
    sequence,
    table,
    timed,
)
from flink_agents.api import Agent, InputEvent, OutputEvent, action
from flink_agents.runtime import LocalExecutionEnvironment

REPO = Path(__file__).resolve().parent.parent
PHOENIX = REPO / ".venv-phoenix" / "bin" / "phoenix"
SPANS_PER_RECORD = 3
"""A run's span and one per action (``CounterAgent`` makes no durable call)."""

EMPTY, RAW = "empty (source -> sink)", "raw KeyedProcessFunction + MapState"
OFF, NOWHERE, STAND_IN, TRACED = (
    "agent, tracing off (default)",
    "agent, tracing on, no collector",
    "agent, tracing on, stand-in collector",
    "agent, tracing on, Phoenix",
)


# -- Phoenix ---------------------------------------------------------------------------------


def free_port() -> int:
    """A loopback TCP port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Phoenix:
    """``phoenix serve`` on loopback, its database in ``workdir``, as ``tests/tracing/phoenix.py``
    starts it (which a bench must not import): its own ports and working directory, no telemetry
    nor outside resources, none of this venv's variables (``PYTHONPATH`` is set for the JVM's
    Python)."""

    def __init__(self, workdir: str) -> None:
        port, self.grpc_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{port}"
        environment = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PHOENIX_", "OTEL_"))
        }
        environment.update(
            PHOENIX_HOST="127.0.0.1",
            PHOENIX_PORT=str(port),
            PHOENIX_GRPC_PORT=str(self.grpc_port),
            PHOENIX_WORKING_DIR=workdir,
            PHOENIX_TELEMETRY_ENABLED="false",
            PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",
            PHOENIX_DISABLE_AGENT_ASSISTANT="true",
            PHOENIX_LOG_MIGRATIONS="false",
        )
        self.log = Path(workdir) / "phoenix.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [str(PHOENIX), "serve"],
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # so that stop() reaches whatever it starts
            )
        deadline = time.monotonic() + 120
        while not self._healthy():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"Phoenix did not start; see {self.log}")
            time.sleep(0.25)

    def endpoint(self, protocol: str) -> str:
        grpc = f"http://127.0.0.1:{self.grpc_port}"
        return grpc if protocol == "grpc" else f"{self.url}/v1/traces"

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/healthz", timeout=5) as response:
                return response.status == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def spans(self) -> int:
        """Spans stored, over every project."""
        query = b'{"query": "{ projects { edges { node { recordCount } } } }"}'
        request = urllib.request.Request(
            f"{self.url}/graphql", query, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            edges = json.load(response)["data"]["projects"]["edges"]
        return sum(edge["node"]["recordCount"] for edge in edges)

    def settled_spans(self, quiet_s: float = 2.0, timeout_s: float = 300.0) -> tuple[int, float]:
        """Spans stored once the count has not moved for ``quiet_s`` (Phoenix ingests in the
        background), and how long that took."""
        started = time.monotonic()
        count, since = self.spans(), started
        while time.monotonic() - since < quiet_s and time.monotonic() - started < timeout_s:
            time.sleep(0.5)
            now = self.spans()
            if now != count:
                count, since = now, time.monotonic()
        return count, since - started

    def cpu_s(self) -> float:
        with open(f"/proc/{self.process.pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


class StandIn:
    """An OTLP/HTTP collector that keeps nothing: a loopback server on a thread of this process
    answering every export at once, counting the spans it received."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        self.received = 0
        lock, reply = threading.Lock(), ExportTraceServiceResponse().SerializeToString()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a collector

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                spans = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
                with lock:
                    stand_in.received += spans
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- the jobs --------------------------------------------------------------------------------


def variants(
    collectors: dict[str, Any], protocol: str, max_queue: int | None, no_log: bool
) -> dict[str, dict[str, Any] | None]:
    """Each timed job's agent options (None: the raw job)."""
    common: dict[str, Any] = {"action_log": "none"} if no_log else {}
    traced = {**common, "tracing": "otlp", "tracing_protocol": protocol}
    if max_queue is not None:
        traced["tracing_max_queue"] = max_queue
    jobs: dict[str, dict[str, Any] | None] = {
        RAW: None,
        OFF: common,
        NOWHERE: {**traced, "tracing_endpoint": f"http://127.0.0.1:{free_port()}"},
    }
    if STAND_IN in collectors:
        jobs[STAND_IN] = {**traced, "tracing_endpoint": collectors[STAND_IN].endpoint}
    if TRACED in collectors:
        jobs[TRACED] = {**traced, "tracing_endpoint": collectors[TRACED].endpoint(protocol)}
    return jobs


def build(env, records: int, keys: int, options: dict[str, Any] | None):
    """A job's stream: raw PyFlink for None, else the agent with ``options``."""
    if options is None:
        return raw_counter_stream(env, records, keys)
    return counter_agent_stream(env, records, keys, **options)


def run_job(name: str, records: int, keys: int, jobs, config: dict[str, str]) -> Timing:
    env = make_env(config=config)
    if name == EMPTY:
        discard(sequence(env, records))
    else:
        discard(build(env, records, keys, jobs[name]))
    return timed(env, name)


def verify(jobs: dict[str, dict[str, Any] | None], keys: int, config, per_key: int = 10) -> None:
    """Every job's outputs on a small input (collected; never timed): the same final count and
    sum per key as raw's."""
    n = per_key * keys
    expected = {f"k{k}": (per_key, sum(range(k, n, keys))) for k in range(keys)}
    for name, options in jobs.items():
        env = make_env(config=config)
        with build(env, n, keys, options).execute_and_collect() as results:
            outputs = list(results)
        final: dict[str, tuple[int, int]] = {}
        for key, count, total in outputs:
            final[key] = max(final.get(key, (0, 0)), (count, total))
        ok = len(outputs) == n and final == expected
        print(f"  verify {name}: {len(outputs)} outputs for {n} records, {'ok' if ok else 'WRONG'}")
        if not ok:
            raise SystemExit(f"{name} produced wrong results")


# -- tracing off on the hot path -------------------------------------------------------------


def _double(n: int) -> int:
    return 2 * n


class OneCall(Agent):
    """One action making one durable call: the path of a run that is not plain."""

    @action(InputEvent)
    @staticmethod
    def call(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=ctx.durable_execute(_double, event.input[1])))


RUNTIME = str(REPO / "flink_agents" / "runtime")
TRACING_MODULES = ("_tracing.py", "_otlp.py")


@contextlib.contextmanager
def counting_lines() -> Iterator[Counter[tuple[str, int]]]:
    """Counts the lines of ``flink_agents/runtime`` executed meanwhile, on any thread."""
    hits: Counter[tuple[str, int]] = Counter()

    def on_line(frame, event, arg):
        if event == "line":
            hits[frame.f_code.co_filename, frame.f_lineno] += 1
        return on_line

    def on_call(frame, event, arg):
        return on_line if frame.f_code.co_filename.startswith(RUNTIME) else None

    sys.settrace(on_call)
    threading.settrace(on_call)
    try:
        yield hits
    finally:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]


def tracer_checks(agent: type[Agent], records: int, keys: int = 10) -> dict[str, float]:
    """The tracer checks the local runner executes per record with tracing off, by site
    (``file:line``): the difference between runs of ``2 * records`` and ``records``, so that
    each key's first run (which takes ``_drive``'s path) does not count. The lines of the
    tracing modules run per record are counted under ``TRACING_MODULES``."""
    runs = []
    for n in (records, 2 * records):
        inputs = [(f"k{i % keys}", i) for i in range(n)]
        with counting_lines() as hits, contextlib.redirect_stderr(io.StringIO()):
            # (the local runner prints its metrics on stderr)
            builder = LocalExecutionEnvironment().from_list(inputs, agents.record_key)
            outputs = builder.apply(agent).to_list()
        assert len(outputs) == n, f"{len(outputs)} outputs for {n} records"
        sites: Counter[str] = Counter()
        for (path, line), count in hits.items():
            if path.endswith(TRACING_MODULES):
                sites[" ".join(TRACING_MODULES)] += count
            elif "tracer is not None" in linecache.getline(path, line):
                sites[f"{Path(path).name}:{line}"] += count
        runs.append(sites)
    once, twice = runs
    return {
        site: (twice[site] - once[site]) / records for site in twice if twice[site] > once[site]
    }


def ns_per_check() -> float:
    """What ``holder.tracer is not None`` costs when it is None (an attribute read and a
    test), less the loop's own cost."""

    class Holder:
        tracer = None

    holder, number = Holder(), 2_000_000
    check = min(
        timeit.repeat("if h.tracer is not None: pass", globals={"h": holder}, number=number)
    )
    empty = min(timeit.repeat("pass", number=number))
    return (check - empty) / number * 1e9


def hot_path(agent_us_per_record: float) -> None:
    print("\n== tracing off on the hot path (local runner, lines counted; no Flink) ==")
    cost = ns_per_check()
    rows = []
    for name, agent in (("CounterAgent", agents.CounterAgent), ("OneCall", OneCall)):
        sites = tracer_checks(agent, 500)
        checks = sum(per_record for site, per_record in sites.items() if ".py:" in site)
        where = ", ".join(f"{site} x{per_record:g}" for site, per_record in sites.items())
        rows.append((name, f"{checks:g}", f"{checks * cost:.0f}", where or "none"))
    print(table(["agent", "checks/record", "ns/record", "sites run per record"], rows))
    print(
        f"one check (`x.tracer is not None` when None): {cost:.1f} ns (timeit, best of 5); "
        f"the agent with tracing off takes {agent_us_per_record:.0f} us a record (above, net)"
    )
    print(
        "CounterAgent's runs take the plain lane, which has no check (its gate, "
        "`engine.observed`, is computed once per operator). OneCall leaves the lane at its "
        "durable call: one check for the call, one for the action's completion. A run on "
        "step's path from its start (an async action) adds one at its start and one at its "
        "end, and one per action's context"
    )


# -- the run ---------------------------------------------------------------------------------


def measure(args: argparse.Namespace, config: dict[str, str], collectors: dict[str, Any]) -> None:
    n, keys = args.records, args.keys
    jobs = variants(collectors, args.protocol, args.max_queue, args.no_log)
    phoenix = collectors.get(TRACED)
    verify(jobs, keys, config)  # also the tracing jobs' warm-up (imports)
    run_job(EMPTY, n, keys, jobs, config)  # warm-up, not reported
    if phoenix is not None:
        phoenix.settled_spans()  # verify's spans ingested: Phoenix idle from here on
    timings: dict[str, list[Timing]] = {name: [] for name in (EMPTY, *jobs)}
    received: dict[str, list[int]] = {name: [] for name in collectors}
    catch_up: list[float] = []
    collector_cpu: list[float] = []
    for round_ in range(args.repeat):
        order = list(jobs)
        random.shuffle(order)
        for name in (EMPTY, *order):
            before = collected(name, collectors)
            cpu = phoenix.cpu_s() if phoenix is not None else 0.0
            timing = run_job(name, n, keys, jobs, config)
            if phoenix is not None:  # a child of this process too: its CPU is not the job's
                cpu = phoenix.cpu_s() - cpu
                timing.jvm_cpu -= cpu
            if name == TRACED:
                collector_cpu.append(cpu)
                catch_up.append(phoenix.settled_spans()[1])  # before the next job starts
            if name in received:
                received[name].append(collected(name, collectors) - before)
            timings[name].append(timing)
        print(
            f"  round {round_ + 1}: "
            + ", ".join(f"{name} {timings[name][-1].wall:.2f} s" for name in (EMPTY, *order))
            + "".join(f"; spans at {name}: {got[-1]:,}" for name, got in received.items()),
            flush=True,
        )
    report(n, keys, args, timings, received, catch_up, collector_cpu)


def collected(name: str, collectors: dict[str, Any]) -> int:
    """Spans at the collector of job ``name`` so far (Phoenix: stored; 0 without one)."""
    if name == TRACED:
        return collectors[TRACED].spans()
    if name == STAND_IN:
        return collectors[STAND_IN].received
    return 0


def report(n, keys, args, timings, received, catch_up, collector_cpu) -> None:
    median = {name: statistics.median(t.wall for t in ts) for name, ts in timings.items()}
    cpu = {
        name: statistics.median(t.py_cpu + t.jvm_cpu for t in ts) for name, ts in timings.items()
    }
    net = {name: wall - median[EMPTY] for name, wall in median.items() if name != EMPTY}
    rows = [(EMPTY, median[EMPTY], "", "", "", "", "", "")]
    for name, seconds in net.items():
        rows.append(
            (
                name,
                median[name],
                seconds,
                n / seconds,
                f"{net[RAW] / seconds:.2f}",
                f"{net[OFF] / seconds:.2f}" if name != RAW else "",
                cpu[name] / n * 1e6,
                _spans(name, n, received),
            )
        )
    print(
        f"\n{n:,} records, {keys} keys, medians of {args.repeat} rounds (net: less the empty job)"
    )
    headers = ["job", "wall s", "net s", "rec/s net", "over raw", "over off", "CPU us/rec"]
    print(table([*headers, "spans at collector/made"], rows))
    print(
        f"spans made: {SPANS_PER_RECORD} per record (the run, its 2 actions). The gauges "
        "tracing.numOfSpans and tracing.numOfSpansDropped are not read: in thread mode they "
        "live inside the JVM and reach only Flink's metric reporters"
    )
    print(
        f"no collector: nothing stores a span; one export of a batch (512 spans) to a refused "
        f"port takes {failed_export_s(args.protocol):.1f} s (the exporter's retries), and the "
        "operator's close waits for the batch processor to flush its queue (up to 2,048 spans "
        "by default: 4 batches), until the SDK gives up after 30 s"
    )
    if received.get(STAND_IN):
        print(
            "stand-in collector: its CPU (decoding each export to count the spans) is this "
            "process's, in the CPU column"
        )
    if received.get(TRACED):
        print(
            f"Phoenix: {statistics.median(collector_cpu):.1f} s of its CPU during the job "
            f"(median; not in the CPU column), then {statistics.median(catch_up):.1f} s to "
            "finish ingesting; stored per round: "
            + ", ".join(f"{count:,}" for count in received[TRACED])
        )
    detail = f"{n:,} records, thread mode, median of {args.repeat}"
    record_figure("tracing.thread.off_over_raw", net[RAW] / net[OFF], detail)
    record_figure("tracing.thread.no_collector_over_off", net[OFF] / net[NOWHERE], detail)
    if STAND_IN in net:
        record_figure("tracing.thread.stand_in_over_off", net[OFF] / net[STAND_IN], detail)
    if TRACED in net:
        record_figure("tracing.thread.phoenix_over_off", net[OFF] / net[TRACED], detail)
    hot_path(net[OFF] / n * 1e6)


def failed_export_s(protocol: str) -> float:
    """Seconds one OTLP export of a 512-span batch to a loopback port nothing listens on
    takes (the SDK's exporter, retrying until its timeout), its log silenced."""
    import logging

    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext, TraceFlags

    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    endpoint = f"http://127.0.0.1:{free_port()}"
    exporter = OTLPSpanExporter(
        endpoint=endpoint if protocol == "grpc" else f"{endpoint}/v1/traces"
    )
    span = ReadableSpan("x", SpanContext(1, 1, False, TraceFlags(1)), start_time=1, end_time=2)
    logger = logging.getLogger("opentelemetry.exporter")
    level, logger.level = logger.level, logging.CRITICAL
    try:
        started = time.perf_counter()
        exporter.export([span] * 512)
        return time.perf_counter() - started
    finally:
        logger.level = level
        exporter.shutdown()


def _spans(name: str, n: int, received: dict[str, list[int]]) -> str:
    made = SPANS_PER_RECORD * n
    if name == NOWHERE:
        return f"0/{made:,}"
    if received.get(name):
        return f"{statistics.median(received[name]):,.0f}/{made:,}"
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3, help="rounds; medians count")
    parser.add_argument("--protocol", choices=("http/protobuf", "grpc"), default="http/protobuf")
    parser.add_argument(
        "--max-queue", type=int, help="tracing-max-queue (default: the option's, 2048)"
    )
    parser.add_argument(
        "--no-log", action="store_true", help="every agent with action_log=none (default: SQLite)"
    )
    parser.add_argument("--no-phoenix", action="store_true", help="skip the Phoenix variant")
    args = parser.parse_args(argv)
    config = {"python.execution-mode": "thread"}
    enable_thread_mode()

    print("== tracing overhead: the memory agent with tracing off and on, vs raw PyFlink ==")
    print(machine_summary())
    print(
        f"records={args.records:,} keys={args.keys} parallelism=1 sink=DiscardingSink "
        f"repeat={args.repeat} protocol={args.protocol} max-queue={args.max_queue or 2048} "
        f"action-log={'none' if args.no_log else 'default'} flink-config={config}",
        flush=True,
    )
    collectors: dict[str, Any] = {}
    if args.protocol == "http/protobuf":
        collectors[STAND_IN] = StandIn()
    else:
        print("the stand-in collector speaks OTLP/HTTP only: no stand-in variant with grpc")
    with tempfile.TemporaryDirectory(prefix="phoenix-") as workdir:
        if args.no_phoenix:
            print("--no-phoenix: skipping the Phoenix variant")
        elif not PHOENIX.exists():
            print(
                f"no {PHOENIX.relative_to(REPO)} (make .venv-phoenix/.installed): skipping Phoenix"
            )
        else:
            started = time.monotonic()
            phoenix = collectors[TRACED] = Phoenix(workdir)
            print(f"Phoenix on {phoenix.url}, up in {time.monotonic() - started:.1f} s", flush=True)
        try:
            measure(args, config, collectors)
        finally:
            for collector in collectors.values():
                collector.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
