"""The same agents over the same inputs behave the same on the local runner and on MiniCluster,
in both of PyFlink's execution modes (process and thread): the same outputs per key in order,
the same final short-term memory per key, the same error records, the same failure.

The pipelines (``parity_scenarios.py``) cover success paths, every failure path under each
error policy (``fail``, ``error-output``, ``retry`` with backoff, an action failing after a
durable call), async calls of random latencies across many keys, every agent option (those
that change results, and those that must not: poll intervals, the action log's retention
and job name, the data directory), and long-term memory. Each runs once on the local
runner; on Flink, the pipelines share one job per execution mode, and each ``fail``-policy
case (which stops its job) has a job of its own.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

from flink_agents.runtime.action_log import open_action_log
from tests.runtime.flink.parity_agents import failing
from tests.runtime.flink.parity_scenarios import (
    FAIL_PIPELINES,
    LONG_TERM,
    MAX_STEPS,
    PINNED_JOB,
    PIPELINES,
    error_output_records,
)
from tests.runtime.flink.runners import (
    MODES,
    Observed,
    failure_named,
    run_flink,
    run_local,
)

pytestmark = pytest.mark.flink

SIDES = ["local", "flink"]


@dataclass
class Side:
    """One runner's results, and the working directory of its pipelines (counter files)."""

    results: dict[str, Observed]
    work_dir: Path

    def __getitem__(self, name: str) -> Observed:
        return self.results[name]


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Side:
    work_dir = tmp_path_factory.mktemp("local")
    pipelines = [*PIPELINES, LONG_TERM, *FAIL_PIPELINES]
    return Side({p.name: run_local(p, work_dir) for p in pipelines}, work_dir)


@pytest.fixture(scope="module", params=MODES)
def mode(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def flink(mode, tmp_path_factory) -> Side:
    """Every pipeline but the ``fail``-policy ones, in one job."""
    work_dir = tmp_path_factory.mktemp(f"flink-{mode}")
    return Side(run_flink([*PIPELINES, LONG_TERM], work_dir, mode), work_dir)


@pytest.fixture(scope="module")
def flink_failures(mode, tmp_path_factory) -> Side:
    """The ``fail``-policy pipelines, a job each (the failure stops the job)."""
    work_dir = tmp_path_factory.mktemp(f"flink-{mode}-fail")
    results = {}
    for pipeline in FAIL_PIPELINES:
        results.update(run_flink([pipeline], work_dir, mode, probe_mode=False))
    return Side(results, work_dir)


@pytest.fixture(params=SIDES)
def side(request, mode) -> Side:
    """Each runner's results, for checks that hold on both (so parity is not vacuous); the
    local runner's are checked once per mode too, which costs nothing."""
    return request.getfixturevalue(request.param)


def per_key(outputs: list) -> dict:
    grouped = defaultdict(list)
    for output in outputs:
        grouped[output.get("key", output.get("user"))].append(output)
    return dict(grouped)


def as_multiset(records: list[dict]) -> list[dict]:
    """Error records in a canonical order: their order across keys is free."""
    return sorted(records, key=repr)


def final_memory(observed: Observed) -> dict:
    """Each key's short-term memory at the end, from its ``probe`` output."""
    return {o["key"]: o["memory"] for o in observed.outputs if o.get("case") == "probe"}


def failed_runs(observed: Observed) -> list[dict]:
    return [e for e in observed.errors if e["kind"] == "failed_run"]


def assert_same(local: Observed, flink: Observed) -> None:
    assert flink.failure is None, flink.failure[-4000:]
    assert local.failure is None, local.failure
    assert per_key(flink.outputs) == per_key(local.outputs)
    assert as_multiset(flink.errors) == as_multiset(local.errors)


def attempt_times(side: Side, pipeline: str, n: int, what: str = "attempts") -> list[float]:
    """When each attempt of record ``n`` ran (or each run of its durable call)."""
    path = side.work_dir / pipeline / f"{n}.{what}"
    return [float(line) for line in path.read_text().splitlines()] if path.exists() else []


# -- every pipeline: same outputs per key (final memory included), same error records --------

DIFFERENCES: dict[str, pytest.MarkDecorator] = {}


@pytest.mark.parametrize(
    "name", [pytest.param(p.name, marks=DIFFERENCES.get(p.name, ())) for p in PIPELINES]
)
def test_minicluster_matches_local_runner(name, local, flink):
    assert local[name].outputs, "the case must produce outputs"
    assert_same(local[name], flink[name])


def test_flink_ran_in_the_requested_execution_mode(flink, mode):
    (probe,) = flink["mode-probe"].outputs
    assert probe["thread_mode"] is (mode == "thread")


# -- the error-output policy ----------------------------------------------------------------


def test_error_output_has_every_kind_of_failure_and_rejected_input(side):
    observed = side["error-output"]
    failed = failed_runs(observed)
    assert {e["action"] for e in failed} == {"route", "explode", "call_sync", "call_async", "spin"}
    for error in failed:
        assert error["attempts"] == 1
        if error["action"] == "spin":
            assert error["error"].startswith(f"FlinkAgentsError: the run exceeded {MAX_STEPS}")
        else:
            assert failing(error["input"]["n"]), error
    rejected = [(e["reason"], e["input"]["n"]) for e in observed.errors if e["kind"] == "rejected"]
    assert sorted(rejected) == [
        ("key ['x'] is not hashable (list)", 9_002),
        ("record has no key field 'k'", 9_001),
    ]


def test_a_failed_action_leaves_no_writes_and_earlier_actions_keep_theirs(side):
    observed = side["error-output"]
    memory = final_memory(observed)
    failed = failed_runs(observed)
    for error in failed:
        key_memory = memory[error["key"]]
        if error["action"] in ("call_sync", "call_async"):  # wrote, then raised
            assert f"n{error['input']['n']}" not in key_memory.get("squares", {})
        if error["action"] == "spin":  # every step before the cap completed
            assert key_memory["spins"] == MAX_STEPS - 1
    # The input action counts runs: its write stays when a later action of the run fails,
    # and goes when it fails itself ("boom").
    booms = {e["input"]["n"] for e in failed if e["action"] == "route"}
    expected = defaultdict(int)
    for record in error_output_records():
        if record["case"] != "probe" and isinstance(record.get("k"), str):
            expected[record["k"]] += record["n"] not in booms
    assert {key: m.get("runs", 0) for key, m in memory.items()} == dict(expected)
    assert all(o["sensory"] == [] for o in observed.outputs if o.get("case") == "probe")


def test_outputs_sent_before_a_failure_are_kept(side):
    observed = side["error-output"]
    exploded = {e["input"]["n"] for e in failed_runs(observed) if e["action"] == "explode"}
    assert exploded
    stages = defaultdict(list)
    for output in observed.outputs:
        if output.get("case") == "fail":
            stages[output["n"]].append(output["at"])
    assert all(stages[n] == ["route"] for n in exploded)
    assert all(at == ["route", "end"] for n, at in stages.items() if n not in exploded)


def test_async_runs_of_a_key_keep_input_order_while_keys_interleave(side):
    observed = side["error-output"]
    inputs = defaultdict(list)
    for record in error_output_records():
        if record["case"] == "async":
            inputs[record["k"]].append(record["n"])
    seen = {}
    for output in observed.outputs:
        if output.get("case") == "async":
            assert output["seen"][-1] == output["n"]
            seen[output["key"]] = output["seen"]
    assert seen == dict(inputs)
    assert sum(len(ns) > 2 for ns in inputs.values()) >= 10  # records queue behind parked runs


# -- the retry policy -----------------------------------------------------------------------


def test_retry_succeeds_or_exhausts_its_attempts(side):
    observed = side["retry"]
    flaky_outputs = {o["n"] for o in observed.outputs if o.get("case") == "flaky"}
    assert flaky_outputs == {100, 101, 103, 104}  # failed once or twice, then succeeded
    exhausted = {e["input"]["n"]: e for e in failed_runs(observed)}
    for n in (102, 105):  # fails 5 times: gives up after 3 attempts
        assert exhausted[n]["attempts"] == 3
        assert exhausted[n]["error"] == f"RuntimeError: attempt 3 of record {n} failed"
    assert all(e["attempts"] == 3 for e in exhausted.values())
    assert {n: len(attempt_times(side, "retry", n)) for n in range(100, 106)} == {
        100: 2,
        101: 3,
        102: 3,
        103: 2,
        104: 3,
        105: 3,
    }
    capped = side["retry-cap"]  # five attempts: the fifth succeeds, or it gives up
    assert [o["n"] for o in capped.outputs if o.get("case") == "flaky"] == [200]
    assert [(e["input"]["n"], e["attempts"]) for e in failed_runs(capped)] == [(201, 5)]


def test_retry_waits_its_exponential_backoff_up_to_the_cap_on_flink(flink):
    """Wall-clock waits, on Flink only: the local runner's clock is simulated (it jumps
    over a backoff when it has nothing else to do), so there a retry costs no time. Only
    the lower bounds are asserted: on a loaded machine a wait may run long by seconds (a
    CI run saw 2.5 s for a 0.4 s backoff), so no upper bound holds on a wall clock."""
    for n in (200, 201):  # 200 ms, then 400 ms, then capped at 400 ms
        times = attempt_times(flink, "retry-cap", n)
        assert len(times) == 5
        gaps = [b - a for a, b in pairwise(times)]
        short = [g for g, backoff in zip(gaps, (0.2, 0.4, 0.4, 0.4), strict=True) if g < backoff]
        assert short == [], gaps  # the drain, too, waits for the rest of a backoff


def test_a_retry_waits_its_backoff_even_when_the_input_ends_first(flink):
    first, second = attempt_times(flink, "retry-drain", 250)
    assert second - first >= 1.5


@pytest.mark.parametrize("log", ["", "-log", "-nolog"])
def test_an_action_failing_after_a_durable_call_retries_alike(log, local, flink):
    """Failed after a sync or an async durable call, then succeeded or exhausted: memory of
    the failed attempts does not remain. With the action log on (by default, or set), the
    call's recorded result answers the next attempt (the call runs once); with it off, the
    call runs again."""
    name = f"retry-durable{log}"
    assert_same(local[name], flink[name])
    for side in (local, flink):
        observed = side[name]
        calls = {o["n"]: o["calls"] for o in observed.outputs if o.get("case") == "flaky"}
        fail_times = {300: 1, 301: 1, 302: 2, 303: 2, 304: 9, 305: 9}
        assert sorted(calls) == [300, 301, 302, 303]
        for n, attempts in fail_times.items():
            runs = len(attempt_times(side, name, n, "calls"))
            assert runs == (min(attempts + 1, 3) if log == "-nolog" else 1), n
            if n in calls:
                assert calls[n] == runs
        memory = {n: final_memory(observed)[f"d{(n - 300) % 3}"]["flaky"] for n in fail_times}
        assert {n: memory[n].get(f"n{n}") for n in fail_times} == {**calls, 304: None, 305: None}
        assert sorted(e["input"]["n"] for e in failed_runs(observed)) == [304, 305]


# -- the fail policy ------------------------------------------------------------------------


@pytest.mark.parametrize("case", [p.name for p in FAIL_PIPELINES])
def test_fail_policy_fails_naming_the_same_key_action_and_run(case, local, flink_failures):
    local_failure = local[case].failure
    assert local_failure is not None
    named = failure_named(local_failure)
    assert named is not None and named[1:3] == ("'k2'", "3"), local_failure
    flink_failure = flink_failures[case].failure
    assert flink_failure is not None, "the Flink job did not fail"
    assert failure_named(flink_failure) == named, flink_failure[-4000:]
    assert local_failure in flink_failure  # the input and the cause too


# -- options --------------------------------------------------------------------------------


def test_async_threads_and_in_flight_limits_do_not_change_results(local, flink):
    for side in (local, flink):
        one, many = side["threads-1"], side["threads-8"]
        assert per_key(one.outputs) == per_key(many.outputs)
        assert as_multiset(one.errors) == as_multiset(many.errors)


def test_action_log_on_or_off_gives_the_same_results(local, flink):
    reference = local["action-log-off"]
    assert failed_runs(reference)
    for side in (local, flink):
        for name in ("action-log-on", "action-log-off"):
            assert per_key(side[name].outputs) == per_key(reference.outputs), name
            assert as_multiset(side[name].errors) == as_multiset(reference.errors), name


QUIET_OPTIONS = ("poll-fast-short-retention", "poll-slow-pinned-job")


def test_poll_intervals_retention_job_name_and_data_dir_do_not_change_results(local, flink):
    """Both pipelines run the same input with other values of these options (none at its
    default): the same results as each other, on both runners (each matches the other
    runner in ``test_minicluster_matches_local_runner``)."""
    reference = local[QUIET_OPTIONS[0]]
    assert failed_runs(reference) and reference.outputs
    for side in (local, flink):
        for name in QUIET_OPTIONS:
            assert per_key(side[name].outputs) == per_key(reference.outputs), name
            assert as_multiset(side[name].errors) == as_multiset(reference.errors), name


def test_data_dir_and_action_log_job_reach_the_flink_job(flink):
    """The default action log is a SQLite file under ``data-dir``, holding the pinned job's
    records under its name (the other pipeline's job has a fresh name)."""
    for name in QUIET_OPTIONS:
        assert (flink.work_dir / name / "data" / "action-log.db").is_file(), name
    pinned_log = flink.work_dir / "poll-slow-pinned-job" / "data" / "action-log.db"
    with open_action_log(pinned_log) as log:
        assert log.count(PINNED_JOB) > 0


def snapshots_per_key(snapshots: list[dict]) -> dict:
    grouped = per_key(snapshots)
    return {k: sorted(v, key=lambda s: s["run_sequence"]) for k, v in grouped.items()}


def test_memory_snapshots_match(local, flink):
    local_snapshots = local["snapshots"].snapshots
    assert local_snapshots is not None, "the local runner has no memory_stream()"
    assert snapshots_per_key(flink["snapshots"].snapshots) == snapshots_per_key(local_snapshots)


def test_memory_snapshots_cover_every_run_on_flink(flink):
    observed = flink["snapshots"]
    rejected = [e for e in observed.errors if e["kind"] == "rejected"]
    assert [e["reason"] for e in rejected] == ["the key selector raised KeyError: 'k'"]
    final = final_memory(observed)
    for key, snapshots in snapshots_per_key(observed.snapshots).items():
        assert [s["run_sequence"] for s in snapshots] == list(range(1, len(snapshots) + 1))
        assert snapshots[-1]["short_term_memory"] == final[key]  # the probe changes nothing


# -- long-term memory -----------------------------------------------------------------------


def test_long_term_memory_matches_local_runner(local, flink):
    """In thread mode too: the offline embedding model runs onnxruntime on a thread of its
    own, since importing it on an operator's thread there never returned."""
    assert_same(local["long-term"], flink["long-term"])


@pytest.mark.parametrize("runner", SIDES)
def test_long_term_memory_and_knowledge_answer_by_meaning(runner, mode, request):
    side = request.getfixturevalue(runner)
    observed = side["long-term"]
    assert observed.failure is None, observed.failure[-3000:]
    # One embedded store for every runner and subtask of the machine (no per-subtask copy).
    vectors = side.work_dir / "long-term" / "vectors"
    assert (vectors / "flink_agents_memory").is_dir()
    assert not list(vectors.glob("subtask-*"))
    answers = {o["id"]: o["answer"] for o in observed.outputs}
    assert answers[5][0] == ["I am allergic to peanuts.", "user:ana"]
    assert answers[7][0] == ["My cat is called Pixel.", "user:bo"]  # outside Flink state: kept
    assert answers[8] == []  # carol sees nothing of ana's memory
    assert answers[9] == "I live in Lisbon by the sea."
    assert answers[10] == ["The Rhine flows into the North Sea."]  # taught under another key
    assert answers[11] == ["Sourdough bread rises thanks to wild yeast."]
    assert answers[12] == 0 and answers[13] == []
    assert answers[15] == {"ops": ["remember", "ask", "forget", "ask"]}  # not the failed one
    (failed,) = failed_runs(observed)
    assert (failed["input"]["id"], failed["action"]) == (6, "handle")


# -- the success-path agents, as before -----------------------------------------------------


def test_async_outputs_keep_input_order_per_key_while_keys_interleave(flink):
    outputs = flink["async-order"].outputs
    for key, items in per_key(outputs).items():
        ns = [item["n"] for item in items]
        assert ns == sorted(ns), key
        assert items[-1]["seen"] == ns
    assert [o["n"] for o in outputs] != sorted(o["n"] for o in outputs)  # keys interleaved


def test_sensory_memory_is_cleared_between_runs_in_map_state(flink):
    outputs = flink["memory-ops"].outputs
    assert all(output["sensory_at_start"] == [] for output in outputs)
    assert all(output["scratch"] == output["n"] for output in outputs)
