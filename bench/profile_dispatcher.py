"""Where the dispatcher's time goes, profiled inside a real PyFlink job.

On a local MiniCluster the Python worker runs in loopback mode: Beam's SDK harness, its
gRPC threads and our dispatcher run in this very process. ``py-spy`` (a bench-only
dependency: ``.venv/bin/pip install py-spy``) attaches to this process and samples the
stacks of all its threads; with ``--gil`` (the default here) it keeps only the samples of
the thread holding the GIL, i.e. the Python execution that limits a worker. Sampling does
not inflate small functions the way a tracing profiler (cProfile, yappi) does: an earlier
yappi version of this script put about 7% of the time in ``uuid4``, which takes 1.4 us.

Each sample is put in one group, by the frames on its stack (first rule that matches):

    PyFlink state & timers   a frame of PyFlink's state/timer code or Beam's state cache
                             and state handler (incl. the bundle-end write-back), or any
                             sample of a thread serving the state gRPC stream
    ours: events             pydantic or uuid frames (building events) under our code
    ours: engine/memory      a frame of flink_agents or bench (dispatcher, engine, memory,
                             the agent's actions), with the stdlib it calls
    Beam/serialization       Beam, PyFlink operations/coders, gRPC, protobuf, pickling
    other                    the rest (threading, queues, ...)

py-spy's ``--gil`` names the GIL's last holder even while no thread holds it, so samples
whose top frame is a blocking wait (``Condition.wait``, gRPC's channel spin, a sleeping
durable call, ...) are counted apart as waiting; shares are of the other, busy samples. The
``~us CPU/record`` column spreads this process's measured CPU time over the groups by those
shares (C code running without the GIL, such as gRPC's core, is spread along with it).

Counters patched into the in-process worker, in a second run of each job (they would slow
the profiled one), give the exact number of PyFlink state API calls, gRPC state requests
(by kind), bundles and timers registered per record.

    PYTHONPATH=/work/main .venv/bin/python -m bench.profile_dispatcher [--records 20000]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench import agents, async_throughput, state_throughput
from bench._common import Timing, machine_summary, table

PROCESS = {"python.execution-mode": "process"}
"""The jobs' mode: the loopback worker of process mode runs in this process, where py-spy
and the counters see it (the agents' own default, thread mode, runs Python in the JVM)."""

STATE, EVENTS, OURS, BEAM, OTHER, WAITING = (
    "PyFlink state & timers",
    "ours: events (pydantic, uuid)",
    "ours: engine/memory/dispatcher",
    "Beam/serialization/transport",
    "other (threads, queues, stdlib)",
    "waiting (GIL free, last holder blocked)",
)
GROUPS = (OURS, EVENTS, STATE, BEAM, OTHER)
# py-spy --gil reports the GIL's last holder, also while no thread holds it: samples whose
# top frame is one of these blocking calls are idle time, not CPU.
WAITS = {
    "wait",
    "_wait_once",
    "acquire",
    "channel_spin",
    "sleep_then",
    "_worker",
    "poll",
    "get",
}
FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*):(?P<line>\d+)\)$")
STATE_FILES = (
    "pyflink/fn_execution/state_impl.py",
    "pyflink/fn_execution/internal_state.py",
    "pyflink/datastream/state.py",
    "pyflink/fn_execution/datastream/process/timerservice_impl.py",
    "pyflink/fn_execution/datastream/timerservice_impl.py",
    "apache_beam/runners/worker/statecache.py",
)
STATE_FUNCS = ("StateHandler", "RuntimeState", "_StateBackedIterable", "CachingMapState")
STATE_STREAM = ("pull_responses", "request_iter")
BEAM_FILES = ("apache_beam/", "pyflink/", "grpc/", "google/", "cloudpickle/", "pickle.py")


@dataclass(frozen=True)
class Frame:
    func: str
    file: str

    @property
    def name(self) -> str:
        """The function's own name, without its class or enclosing functions."""
        return self.func.rsplit(".", 1)[-1]

    @property
    def ours(self) -> bool:
        """Code of the framework or of the benchmark's agents (not the benchmark driver)."""
        return self.file.startswith(("flink_agents/", "bench/agents.py")) or (
            "/flink_agents/" in self.file
        )

    @property
    def state(self) -> bool:
        return self.file.endswith(STATE_FILES) or any(s in self.func for s in STATE_FUNCS)

    @property
    def events(self) -> bool:
        return (
            self.file.startswith("pydantic")
            or "/pydantic/" in self.file
            or self.file == "uuid.py"
            or self.file.endswith("/uuid.py")
        )

    @property
    def beam(self) -> bool:
        return any(b in self.file for b in BEAM_FILES)

    def label(self) -> str:
        return f"{self.func} ({_short(self.file)})"


def _short(path: str) -> str:
    """``path`` from its package on: after ``site-packages/``, the repository, or the
    standard library's ``lib/pythonX.Y/``."""
    for marker in ("site-packages/", f"{Path(__file__).resolve().parents[1]}/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return re.split(r"lib/python3\.\d+/", path, maxsplit=1)[-1]


def parse_frame(text: str) -> Frame:
    match = FRAME.match(text)
    if match is None:
        return Frame(text, "")
    return Frame(match["func"], match["file"])


def classify(thread: str, frames: list[Frame]) -> str:
    top = frames[-1]
    if top.name in WAITS and (top.name != "get" or top.file.endswith("queue.py")):
        return WAITING
    if any(f.name in STATE_STREAM for f in frames) or any(f.state for f in frames):
        return STATE
    ours_at = [i for i, f in enumerate(frames) if f.ours]
    if ours_at and any(f.events for f in frames[ours_at[0] :]):
        return EVENTS
    if ours_at:
        return OURS
    if any(f.beam for f in frames):
        return BEAM
    return OTHER


def thread_role(thread: str, frames: list[Frame]) -> str:
    names = {f.name for f in frames}
    if names & set(STATE_STREAM):
        return "state gRPC stream"
    if names & {"process_bundle", "process_encoded"} or any(f.ours for f in frames):
        return "bundle worker"
    if "channel_spin" in names:
        return "gRPC channel spin"
    if names & {"consume_request_iterator", "_read_inputs", "_write_outputs"}:
        return "gRPC streams (data, state)"
    if thread.startswith("MainThread"):
        return "main (client)"
    if thread.startswith("flink-agents-async"):
        return "durable-call executor"
    return "other"


@dataclass
class Profile:
    name: str
    records: int
    rate: int
    timing: Timing | None = None
    samples: int = 0
    groups: Counter[str] = field(default_factory=Counter)
    roles: Counter[str] = field(default_factory=Counter)
    own: Counter[tuple[str, str]] = field(default_factory=Counter)
    cumulative: Counter[tuple[str, str]] = field(default_factory=Counter)
    counters: Counter[str] = field(default_factory=Counter)

    @property
    def busy(self) -> int:
        """Samples of a thread running Python (not blocked in a wait)."""
        return self.samples - self.groups[WAITING]

    def gil_us_per_record(self, group: str) -> float:
        """Time the GIL was held in this group, per record (samples / sampling rate)."""
        return self.groups[group] / self.rate / self.records * 1e6

    def us_per_record(self, group: str) -> float:
        """The process's CPU time spread over the groups by their share of busy samples."""
        assert self.timing is not None
        share = self.groups[group] / max(self.busy, 1)
        return share * self.timing.py_cpu / self.records * 1e6

    def read(self, path: Path) -> None:
        """Fold py-spy's raw (collapsed) output into the counters."""
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            head, *rest = stack.split(";")
            thread = head.split(": ", 1)[1] if ": " in head else head
            frames = [parse_frame(f) for f in rest]
            if not frames:
                continue
            group = classify(thread, frames)
            self.samples += count
            self.groups[group] += count
            self.roles[thread_role(thread, frames)] += count
            self.own[(frames[-1].label(), group)] += count
            seen: set[str] = set()
            for f in frames:
                label = f.label()
                if label not in seen:
                    seen.add(label)
                    self.cumulative[(label, _group_of_frame(f))] += count


def _group_of_frame(frame: Frame) -> str:
    if frame.state:
        return STATE
    if frame.events:
        return EVENTS
    if frame.ours:
        return OURS
    if frame.beam:
        return BEAM
    return OTHER


# -- counters patched into the in-process (loopback) worker ---------------------------------


@contextmanager
def counting(counters: Counter[str]) -> Iterator[None]:
    """Count gRPC state requests (by kind), bundle-end commits and timer registrations."""
    from apache_beam.runners.worker.sdk_worker import GrpcStateHandler
    from pyflink.fn_execution import state_impl
    from pyflink.fn_execution.datastream.process import timerservice_impl

    patches: list[tuple[object, str, Callable]] = []

    def patch(owner: object, name: str, count: Callable[..., str]) -> None:
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            counters[count(*args, **kwargs)] += 1
            return original(*args, **kwargs)

        patches.append((owner, name, original))
        setattr(owner, name, wrapper)

    patch(
        GrpcStateHandler,
        "_request",
        lambda self, request: f"state request: {request.WhichOneof('request')}",
    )
    patch(state_impl.RemoteKeyedStateBackend, "commit", lambda self: "bundles (state commits)")
    api = {
        state_impl.SynchronousMapRuntimeState: ("get", "put", "remove", "contains", "clear"),
        state_impl.SynchronousValueRuntimeState: ("value", "update", "clear"),
        state_impl.SynchronousListRuntimeState: ("get", "add", "update", "clear"),
    }
    for owner, names in api.items():
        kind = owner.__name__.removeprefix("Synchronous").removesuffix("RuntimeState")
        for name in names:
            patch(owner, name, lambda *a, _label=f"state API: {kind}State.{name}", **k: _label)
    patch(
        timerservice_impl.InternalTimerServiceImpl,
        "_set_timer",
        lambda self, kind, *a: f"timer: {getattr(kind, 'name', kind)}",
    )
    try:
        yield
    finally:
        for owner, name, original in reversed(patches):
            setattr(owner, name, original)


# -- running and sampling -------------------------------------------------------------------


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        sys.exit("bench.profile_dispatcher needs py-spy: .venv/bin/pip install py-spy")
    return found


def profiled(name: str, records: int, job: Callable[[], Timing], rate: int, gil: bool) -> Profile:
    profile = Profile(name, records, rate)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "stacks.txt"
        command = [py_spy(), "record", "--pid", str(os.getpid()), "--format", "raw"]
        # --nonblocking: do not pause the process per sample (pausing ~300 threads costs a
        # lot); a few samples come out torn and are dropped by py-spy as errors.
        command += ["-o", str(out), "--threads", "--rate", str(rate), "--nonblocking"]
        if gil:
            command.append("--gil")
        spy = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        time.sleep(1.5)  # let it attach
        try:
            profile.timing = job()
        finally:
            spy.send_signal(signal.SIGINT)
            log = spy.communicate(timeout=120)[0].decode(errors="replace")
        if not out.exists():
            sys.exit(f"py-spy wrote nothing:\n{log}")
        profile.read(out)
    # The counters wrap hot functions: count in a second run, outside the profiled one.
    with counting(profile.counters):
        job()
    return profile


def jobs(records: int, async_records: int) -> dict[str, tuple[int, Callable[[], Timing]]]:
    """The jobs we can profile: (records, run it)."""
    return {
        "agent": (records, lambda: state_throughput.agent_job(records, PROCESS)),
        "raw": (records, lambda: state_throughput.raw_job(records, PROCESS)),
        "async": (
            async_records,
            # Its timing only: ``agent_job`` also returns the spans it measured.
            lambda: async_throughput.agent_job(async_records, 256, 0.2, PROCESS, None)[0],
        ),
    }


def print_profile(p: Profile, top: int) -> None:
    t = p.timing
    assert t is not None
    records = p.records
    print(
        f"\n---- {p.name} job: {records:,} records, {t.wall:.1f} s wall, "
        f"{t.py_cpu:.1f} s CPU in this process, {t.jvm_cpu:.1f} s in the JVM; "
        f"{p.samples:,} samples ----"
    )
    total = max(p.samples, 1)
    busy = max(p.busy, 1)
    rows = [
        (
            g,
            p.groups[g],
            f"{100 * p.groups[g] / busy:.0f}%",
            f"{p.gil_us_per_record(g):.0f}",
            f"{p.us_per_record(g):.0f}",
        )
        for g in GROUPS
    ]
    waiting = f"({100 * p.groups[WAITING] / total:.0f}% of all)"
    rows.append((WAITING, p.groups[WAITING], waiting, f"{p.gil_us_per_record(WAITING):.0f}", ""))
    headers = ["group", "samples", "share of busy", "us GIL/record", "~us CPU/record"]
    print(table(headers, rows))
    print()
    print(table(["thread role", "samples"], p.roles.most_common()))
    print()
    print(table(["exact counts", "total", "per record"], _counter_rows(p)))
    print()
    print(f"top {top} functions by own time (the frame on top of the stack):")
    rows = [
        (_cut(label), group, n, f"{100 * n / total:.1f}%")
        for (label, group), n in p.own.most_common(top)
    ]
    print(table(["function (file)", "group", "samples", "share"], rows))
    print()
    ours = Counter({k: v for k, v in p.cumulative.items() if k[1] == OURS and v > 0}).most_common(
        top
    )
    print(f"top {top} of our functions by cumulative time (on the stack):")
    rows = [(_cut(label), n, f"{100 * n / total:.1f}%") for (label, _), n in ours]
    print(table(["function (file)", "samples", "share"], rows))


def _counter_rows(p: Profile) -> list[tuple[str, int, str]]:
    rows = [(name, n, f"{n / p.records:.3f}") for name, n in sorted(p.counters.items())]
    for prefix, label in (("state API", "state API calls"), ("state request", "state requests")):
        n = sum(v for name, v in p.counters.items() if name.startswith(prefix))
        rows.append((f"{label}, all kinds", n, f"{n / p.records:.3f}"))
    return rows


def _cut(text: str, width: int = 90) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def local_runner_us(records: int) -> float:
    """The same agent on the local runner (dicts for state): our code's own cost."""
    from flink_agents.api import AgentsExecutionEnvironment

    data = [agents.ToRecord()(n) for n in range(records)]
    best = float("inf")
    for _ in range(3):
        environment = AgentsExecutionEnvironment.get_execution_environment()
        started = time.perf_counter()
        environment.from_list(data, agents.record_key).apply(agents.CounterAgent).to_list()
        best = min(best, time.perf_counter() - started)
    agents.COUNTS.clear()
    return best / records * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--jobs", default="agent,raw,async", help="agent, raw, async")
    parser.add_argument(
        "--async-records",
        type=int,
        default=2000,
        help="runs of the async job (0.2 s calls, in-flight 256, one record per key)",
    )
    parser.add_argument("--rate", type=int, default=250, help="samples per second")
    parser.add_argument("--all-threads", action="store_true", help="not only the GIL holder")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)

    print("== profile of the agent dispatcher inside a PyFlink job (py-spy, all threads) ==")
    print(machine_summary())
    print(
        f"records={args.records:,} keys={agents.NUM_KEYS} rate={args.rate}/s "
        f"samples={'all active threads' if args.all_threads else 'GIL holder only'}",
        flush=True,
    )
    # Warm-up without the profiler: starts the loopback worker and imports everything.
    state_throughput.raw_job(1_000, PROCESS)
    state_throughput.agent_job(1_000, PROCESS)
    agents.COUNTS.clear()

    available = jobs(args.records, args.async_records)
    profiles = []
    for name in args.jobs.split(","):
        records, job = available[name]
        profiles.append(profiled(name, records, job, args.rate, not args.all_threads))
        agents.COUNTS.clear()
    for profile in profiles:
        print_profile(profile, args.top)

    sync = [p for p in profiles if p.name in ("agent", "raw")]
    if len(sync) == 2:
        print("\n---- agent vs raw, us per record: GIL time / process CPU spread by share ----")
        rows = [
            (g, *(f"{p.gil_us_per_record(g):.0f} / {p.us_per_record(g):.0f}" for p in sync))
            for g in GROUPS
        ]
        totals = (
            f"{p.busy / p.rate / p.records * 1e6:.0f} / {p.timing.py_cpu / p.records * 1e6:.0f}"
            for p in sync
        )
        rows.append(("total (GIL busy / process CPU)", *totals))
        print(table(["group", *(f"{p.name}: GIL / CPU" for p in sync)], rows))
        print(
            f"calibration: the same CounterAgent on the local runner (dict state, no Flink, "
            f"no profiler): {local_runner_us(args.records):.0f} us/record"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
