"""The agents' state on Flink's RocksDB and ForSt state backends (issue 45): what a job
computes does not depend on where its keyed state lives, and a savepoint carries it from one
backend to another.

1. **Parity.** A subset of the parity suite's pipelines (``parity_scenarios.py``), chosen to
   touch every kind of state the dispatcher keeps, runs in one MiniCluster job per backend:
   heap (``hashmap``), ``rocksdb`` and ``forst``. Each backend's outputs per key (final
   short-term memory included), error records and memory snapshots equal heap's, and heap's
   equal the local runner's, as in ``test_parity.py``. Thread mode only, our jobs' default:
   in process mode the same subset takes about 30 s a job on this machine, against 8-13 s,
   and its state reaches the same Java backend (``test_parity.py`` holds process mode equal
   to the local runner on heap).

   That the backend was really used is read from the backend itself: RocksDB and ForSt
   write an information log per instance (``state.backend.rocksdb.log.dir`` /
   ``state.backend.forst.log.dir``), named after the operator and subtask, listing the column
   families it holds. Every dispatcher subtask of the job must have one, holding the
   dispatcher's states (``short_term``, ``sensory``, ``control``, ``pending_inputs``) and its
   timers; a heap job writes none. A test that passed with the option ignored would fail
   there.

2. **Savepoints and checkpoints.** One streaming job (``LedgerAgent``: two durable calls a
   record, memory written with set, new objects and deletes, sensory memory; JSON lines in
   and out, outputs and memory snapshots committed on checkpoints), in thread mode, runs in
   three phases over three batches of records, each phase restored from the savepoint of
   the one before (canonical format, which lets a job change backends):

   - on heap, stopped with a savepoint at the first committed output of the first batch;
   - on RocksDB with incremental checkpoints: it finishes the first batch, fails once in
     the middle of the second (Flink restores the phase's last incremental checkpoint), and
     is stopped with a savepoint at the first committed output of the third;
   - on RocksDB, until every record has its output.

   Every record has exactly one output, whose per-user count continues across every stop,
   switch and failure; no durable call whose result was recorded runs again; each user's
   runs have one memory snapshot each, numbered on from the last, the final one the memory
   the records make. Each phase's backend is shown as above, and the incremental
   checkpoints by their RocksDB files in the checkpoints' ``shared`` directory.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyflink.common import Configuration
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.plan import to_plan
from flink_agents.runtime.flink import read_json_files
from flink_agents.testing import stop_with_savepoint
from flink_agents.testing.recovery import (
    LedgerAgent,
    check_recovery,
    expected_memory,
    make_records,
    read_ledger,
)
from tests.json_lines import read_json_lines, write_json_lines
from tests.memory.long_term.rescale_job import wait_for_answers
from tests.runtime.flink.parity_scenarios import PIPELINES
from tests.runtime.flink.runners import Observed, run_flink, run_local
from tests.runtime.flink.test_parity import as_multiset, per_key, snapshots_per_key

pytestmark = [pytest.mark.slow, pytest.mark.flink]

HEAP = "hashmap"
BACKENDS = (HEAP, "rocksdb", "forst")

DISPATCHER_STATES = {"short_term", "sensory", "control", "pending_inputs"}
"""The keyed states of every dispatcher (``docs/architecture.md``, "The Flink dispatcher")."""
DISPATCHER_TIMERS = {"_timer_state/processing_user-timers", "_timer_state/event_user-timers"}
"""Flink's timer queues, which RocksDB and ForSt keep in column families of their own."""


def backend_config(backend: str, directory: Path) -> dict[str, str]:
    """Flink options running a job's keyed state on ``backend``, with RocksDB's and ForSt's
    working directories and information logs under ``directory`` (the options of the
    backends not chosen are ignored: a heap job writes nothing there)."""
    return {
        "state.backend.type": backend,
        "state.backend.rocksdb.localdir": str(directory / "rocksdb"),
        "state.backend.rocksdb.log.dir": str(directory / "rocksdb-log"),
        "state.backend.rocksdb.log.level": "INFO_LEVEL",
        "state.backend.forst.local-dir": str(directory / "forst"),
        "state.backend.forst.log.dir": str(directory / "forst-log"),
        "state.backend.forst.log.level": "INFO_LEVEL",
    }


@dataclass(frozen=True)
class BackendLog:
    """One RocksDB or ForSt instance's information log: whose it is and what it held."""

    backend: str
    operator: str
    """The operator's class and id, as Flink names the instance's directory."""
    subtask: str
    """``<index>_<parallelism>``, 1-based."""
    column_families: frozenset[str]


def backend_logs(directory: Path) -> list[BackendLog]:
    """The information logs RocksDB and ForSt wrote under ``directory``
    (``backend_config``)."""
    logs = []
    for backend in ("rocksdb", "forst"):
        for path in sorted((directory / f"{backend}-log").glob("*_LOG")):
            text = path.read_text(errors="replace")
            # "SST files in <its working directory>/...": which backend's directory it is in
            if f"SST files in {directory / backend}/" not in text:
                continue
            found = re.search(r"_op_(\w+?_[0-9a-f]{32})__(\d+_\d+)__", path.name)
            assert found, path.name
            families = frozenset(re.findall(r"column family \[([^\]]+)\]", text))
            logs.append(BackendLog(backend, *found.groups(), families))
    return logs


def dispatcher_logs(directory: Path) -> list[BackendLog]:
    """The logs of instances that held a dispatcher's state."""
    return [log for log in backend_logs(directory) if log.column_families >= DISPATCHER_STATES]


# -- 1. parity -------------------------------------------------------------------------------

PARITY = (
    "memory-ops",  # nested objects replaced, deleted, copied; sensory memory across actions
    "async-order",  # parked async runs, lists in memory, inputs queued behind them
    "scheduling",  # scheduled events, sleeping runs: in the control value and timers
    "forgetting",  # ForgetKey clears a key's state, with runs waiting and events pending
    "parallel-actions",  # fan-out groups parked together
    "error-output",  # every failure kind, rejected records, runaway loops
    "retry",  # runs parked waiting for a backoff
    "snapshots",  # the memory_snapshots side output
    "action-log-on",  # the action log answering replays
)
PARALLELISM = 2
PIPELINES_RUN = [p for p in PIPELINES if p.name in PARITY]


@dataclass
class BackendRun:
    """One backend's job: what each pipeline produced, and the job's directories."""

    results: dict[str, Observed]
    work_dir: Path
    backend_dir: Path


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, BackendRun]:
    """Every chosen pipeline, in one thread-mode job per backend; and on the local runner."""
    assert len(PIPELINES_RUN) == len(PARITY), "a pipeline of PARITY is missing"
    found = {}
    for backend in BACKENDS:
        root = tmp_path_factory.mktemp(backend)
        config = backend_config(backend, root / "backend")
        results = run_flink(PIPELINES_RUN, root / "work", "thread", PARALLELISM, config=config)
        found[backend] = BackendRun(results, root / "work", root / "backend")
    local = tmp_path_factory.mktemp("local")
    found["local"] = BackendRun({p.name: run_local(p, local) for p in PIPELINES_RUN}, local, local)
    return found


def test_each_dispatcher_subtask_kept_its_state_and_timers_in_the_backend_named(runs):
    """The evidence that the option was obeyed: a log per dispatcher subtask (the chosen
    pipelines and the mode probe), from the backend named, holding the dispatcher's states
    and timers. The heap job, the control, left none."""
    assert backend_logs(runs[HEAP].backend_dir) == []
    dispatchers = len(PIPELINES_RUN) + 1  # and the mode probe
    subtasks = {f"{i}_{PARALLELISM}" for i in range(1, PARALLELISM + 1)}
    for backend in BACKENDS[1:]:
        logs = dispatcher_logs(runs[backend].backend_dir)
        assert {log.backend for log in logs} == {backend}
        assert len(logs) == dispatchers * PARALLELISM
        assert len({log.operator for log in logs}) == dispatchers
        assert {log.subtask for log in logs} == subtasks
        assert all(log.column_families >= DISPATCHER_TIMERS for log in logs)


def test_every_job_ran_in_thread_mode(runs):
    for backend in BACKENDS:
        (probe,) = runs[backend].results["mode-probe"].outputs
        assert probe["thread_mode"] is True, backend


@pytest.mark.parametrize("name", PARITY)
@pytest.mark.parametrize("backend", BACKENDS)
def test_outputs_errors_and_memory_snapshots_equal_heaps(backend, name, runs):
    """Each backend against heap; heap against the local runner (the parity suite's check)."""
    observed = runs[backend].results[name]
    reference = runs["local" if backend == HEAP else HEAP].results[name]
    assert observed.failure is None, observed.failure[-4000:]
    assert reference.outputs, "the case must produce outputs"
    assert per_key(observed.outputs) == per_key(reference.outputs)
    assert as_multiset(observed.errors) == as_multiset(reference.errors)
    if reference.snapshots is not None:
        assert observed.snapshots, "no memory snapshot"
        assert snapshots_per_key(observed.snapshots) == snapshots_per_key(reference.snapshots)


@pytest.mark.parametrize("backend", BACKENDS[1:])
def test_retried_and_durable_calls_ran_as_often_as_on_heap(backend, runs):
    """The counter files the retry pipeline's attempts leave: as many on each backend."""

    def attempts(run: BackendRun) -> dict[str, int]:
        directory = run.work_dir / "retry"
        return {path.name: len(path.read_text().splitlines()) for path in directory.iterdir()}

    counted = attempts(runs[HEAP])
    assert counted, "the retry pipeline counted no attempt"
    assert attempts(runs[backend]) == counted


# -- 2. savepoints and checkpoints ------------------------------------------------------------

USERS = 4
PER_USER = 8
"""Records per user per batch: a user's runs are sequential, each ``DELAY_S`` at least, so a
batch lasts ``PER_USER * DELAY_S`` and a stop made at its first committed output finds work
in flight (asserted)."""
DELAY_S = 0.2
BATCH = USERS * PER_USER
RECORDS = make_records(3 * BATCH, USERS)
BATCHES = [RECORDS[i : i + BATCH] for i in range(0, len(RECORDS), BATCH)]
FAIL_AFTER_CALLS = [3 * BATCH]
"""The ledger size at which the first action fails once: two calls a record, so half way
through the second batch."""
CHECKPOINT_INTERVAL_MS = 300
MAX_PARALLELISM = 128
JOB = "state-backends"
"""The action log's job name, the same in every phase (a restore reads what it recorded)."""


@dataclass
class Phase:
    """One submission of the job."""

    backend: str
    savepoint: str | None = None
    incremental: bool = False
    restarts: int = 0


@dataclass
class Chain:
    """Where the job's phases keep their files."""

    root: Path

    def __post_init__(self) -> None:
        for name in ("input", "out", "memory", "data"):
            (self.root / name).mkdir(parents=True, exist_ok=True)

    def outputs(self) -> list[dict[str, Any]]:
        return read_json_files(self.root / "out")

    def answered(self) -> set[int]:
        return {output["id"] for output in self.outputs()}

    def drop(self, number: int) -> None:
        """Batch ``number`` as a new input file (hidden first: the source skips those)."""
        hidden = self.root / "input" / f".batch-{number}.jsonl"
        hidden.write_text("".join(json.dumps(r) + "\n" for r in BATCHES[number]))
        hidden.rename(hidden.with_name(hidden.name[1:]))

    def environment(self, phase: Phase, number: int) -> StreamExecutionEnvironment:
        directory = self.root / f"phase-{number}"
        configuration = Configuration()
        for name, value in backend_config(phase.backend, directory).items():
            configuration.set_string(name, value)
        configuration.set_string("python.execution-mode", "thread")
        configuration.set_string("execution.checkpointing.dir", (directory / "chk").as_uri())
        incremental = "true" if phase.incremental else "false"
        configuration.set_string("execution.checkpointing.incremental", incremental)
        # Every state file to a file (not inlined in the metadata, as files under 20 KB are),
        # so an incremental checkpoint's RocksDB files can be seen in ``shared``.
        configuration.set_string("execution.checkpointing.data-inline-threshold", "0 b")
        if phase.restarts:
            configuration.set_string("restart-strategy.type", "fixed-delay")
            configuration.set_string("restart-strategy.fixed-delay.attempts", str(phase.restarts))
            configuration.set_string("restart-strategy.fixed-delay.delay", "200 ms")
        else:
            configuration.set_string("restart-strategy.type", "none")
        if phase.savepoint:
            configuration.set_string("execution.savepoint.path", phase.savepoint)
        env = StreamExecutionEnvironment.get_execution_environment(configuration)
        env.set_parallelism(2)
        env.set_max_parallelism(MAX_PARALLELISM)
        env.enable_checkpointing(CHECKPOINT_INTERVAL_MS)
        return env

    def submit(self, phase: Phase, number: int) -> Any:
        """Phase ``number``'s job, started: ``LedgerAgent`` over the input directory, its
        outputs and memory snapshots to files committed on checkpoints."""
        env = self.environment(phase, number)
        agents = AgentsExecutionEnvironment.get_execution_environment(
            env, data_dir=str(self.root / "data"), action_log_job=JOB, memory_snapshots=True
        )
        plan = to_plan(LedgerAgent).model_copy(
            update={
                "config": {
                    "ledger": str(self.root / "ledger.jsonl"),
                    "delay_s": DELAY_S,
                    "fail_after_calls": FAIL_AFTER_CALLS,
                }
            }
        )
        records = read_json_lines(env, str(self.root / "input"), json.loads)
        built = agents.from_datastream(records, "user").apply(plan)
        write_json_lines(built.to_datastream(), str(self.root / "out"))
        write_json_lines(built.memory_stream(), str(self.root / "memory"), name="memory")
        return env.execute_async(f"{JOB}-{number}")

    def stop_mid_batch(self, client: Any, number: int) -> tuple[str, set[int]]:
        """Drop batch ``number``, stop with a savepoint at its first committed output; the
        savepoint and the batch's ids without an output at the stop."""
        ended = client.get_job_execution_result()
        ids = {record["id"] for record in BATCHES[number]}
        self.drop(number)
        deadline = time.monotonic() + 120
        while not ids & self.answered():
            assert not ended.done(), ended.result()
            assert time.monotonic() < deadline, f"no output of batch {number}"
            time.sleep(0.02)
        savepoint = stop_with_savepoint(client, (self.root / "savepoints").as_uri())
        ended.result()
        return savepoint, ids - self.answered()

    def until_answered(self, client: Any, ids: set[int]) -> None:
        wait_for_answers(client.get_job_execution_result(), self.root / "out", ids)


@dataclass
class Chained:
    """What the three phases left for the tests to check."""

    job: Chain
    open_at_stops: tuple[set[int], set[int]]
    """Each savepoint's batch: the ids without an output when it was taken."""
    incremental_files: list[str]
    """The RocksDB files in the second phase's ``shared`` checkpoint directory, after its
    failure and restore."""


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> Chained:
    """The three phases (module docstring)."""
    job = Chain(tmp_path_factory.mktemp("chain"))
    clients = []  # cancelled at the end, should a phase fail with its job running
    try:
        clients.append(job.submit(Phase(HEAP), 0))
        heap_savepoint, open_at_first_stop = job.stop_mid_batch(clients[-1], 0)

        phase = Phase("rocksdb", heap_savepoint, incremental=True, restarts=1)
        clients.append(second := job.submit(phase, 1))
        job.until_answered(second, {r["id"] for r in BATCHES[0]})
        job.drop(1)  # only now: a checkpoint of this phase completed (it committed batch 0)
        job.until_answered(second, {r["id"] for r in BATCHES[0] + BATCHES[1]})
        shared = job.root / "phase-1" / "chk" / str(second.get_job_id()) / "shared"
        incremental_files = sorted(path.name for path in shared.iterdir())
        rocksdb_savepoint, open_at_second_stop = job.stop_mid_batch(second, 2)

        clients.append(third := job.submit(Phase("rocksdb", rocksdb_savepoint), 2))
        job.until_answered(third, {r["id"] for r in RECORDS})
    finally:
        for client in clients:
            if not client.get_job_execution_result().done():
                client.cancel().result()
    return Chained(job, (open_at_first_stop, open_at_second_stop), incremental_files)


def test_each_stop_found_records_of_its_batch_still_in_flight_or_queued(chain):
    """The premise of a stop in the middle of a stream."""
    assert all(chain.open_at_stops)


def test_the_phases_ran_on_heap_then_rocksdb(chain):
    root = chain.job.root
    assert backend_logs(root / "phase-0") == []
    for number in (1, 2):
        logs = dispatcher_logs(root / f"phase-{number}")
        assert logs and {log.backend for log in logs} == {"rocksdb"}, number


def test_the_rocksdb_job_failed_once_and_restored_an_incremental_checkpoint(chain):
    """The injected failure happened after a checkpoint of the phase had completed, so
    Flink restored that checkpoint (had it gone back to the savepoint, the source would have
    read batch 0 again and its outputs, committed, would be there twice: checked below).
    The checkpoints were incremental: RocksDB files in the checkpoints' ``shared``
    directory, which a full checkpoint never writes."""
    assert (chain.job.root / f"failed-after-{FAIL_AFTER_CALLS[0]}").exists()
    assert chain.incremental_files


def test_every_record_has_one_output_and_no_recorded_call_ran_again(chain):
    job = chain.job
    report = check_recovery(RECORDS, job.outputs(), read_ledger(job.root / "ledger.jsonl"))
    assert report.ok, report
    assert (report.lost, report.duplicated, report.outputs) == (0, 0, len(RECORDS))


def test_counters_continue_across_the_stops_the_switch_and_the_failure(chain):
    position = Counter()
    expected = {}
    for record in RECORDS:
        position[record["user"]] += 1
        expected[record["id"]] = position[record["user"]]
    assert {o["id"]: o["count"] for o in chain.job.outputs()} == expected


def test_short_term_memory_ends_as_the_records_make_it(chain):
    last: dict[str, dict[str, Any]] = {}
    sequences = defaultdict(list)
    for snapshot in sorted(
        read_json_files(chain.job.root / "memory"), key=lambda s: s["run_sequence"]
    ):
        last[snapshot["key"]] = snapshot["short_term_memory"]
        sequences[snapshot["key"]].append(snapshot["run_sequence"])
    assert last == expected_memory(RECORDS)
    # one snapshot per run, each run once: the run sequence too continued
    assert dict(sequences) == {f"u{u}": list(range(1, 3 * PER_USER + 1)) for u in range(USERS)}
