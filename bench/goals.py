"""Issue 13's goals as one table: each headline figure of a ``make bench`` run against its target.

The benchmarks append their headline figures to the JSON-lines file ``$BENCH_FIGURES`` names
(``bench._common.record_figure``; ``bench/run_all.sh`` sets it to ``bench/out/figures.jsonl``
and empties it first), one object per line: ``figure`` (an id), ``value``, ``detail`` (what
it was measured on), ``at`` (UTC) and ``load`` (the load average when it was recorded). This
reads them and prints every goal with its figure, its target and whether it is met; where a
figure id occurs more than once, the last one counts. A goal whose figure is missing (its
benchmark did not run, or failed) is listed as not measured.

Every ratio is one run's: the agent and its baseline ran back to back in the same process
(Apache Flink Agents, which needs a venv of its own, right after in the same ``make bench``).

    PYTHONPATH=/work/main .venv/bin/python -m bench.goals [bench/out/figures.jsonl]
"""

from __future__ import annotations

import json
import operator
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench._common import FIGURES_ENV, table

DEFAULT_FIGURES = Path(__file__).resolve().parent / "out" / "figures.jsonl"


@dataclass(frozen=True)
class Goal:
    number: str
    what: str
    figure: str | tuple[str, str]
    """A figure id, or (numerator, denominator): a ratio of two figures."""
    at_least: bool
    target: float


GOALS = (
    Goal(
        "1",
        "agent, action_log=none / raw KeyedProcessFunction",
        "state.thread.no_log_over_raw",
        True,
        0.7,
    ),
    Goal(
        "1",
        "agent, all defaults / Apache Flink Agents 0.2.0 (records/s net)",
        ("state.thread.defaults_rec_s", "apache.thread.rec_s"),
        True,
        3.0,
    ),
    Goal(
        "2",
        "agent, default (SQLite) log / action_log=none",
        "state.thread.log_over_no_log",
        True,
        0.9,
    ),
    Goal("2", "agent, PostgreSQL log / action_log=none", "state.thread.pg_over_no_log", True, 0.8),
    Goal(
        "3",
        "async, default options, 2,000 calls of 50 ms / ideal",
        "async.thread.default_options",
        True,
        0.9,
    ),
    Goal("3", "async, 1 in flight, 200 ms calls / ideal", "async.thread.L1", True, 0.9),
    Goal("3", "async, 16 in flight / ideal", "async.thread.L16", True, 0.9),
    Goal("3", "async, 64 in flight / ideal", "async.thread.L64", True, 0.9),
    Goal("3", "async, 256 in flight / ideal", "async.thread.L256", True, 0.9),
    Goal(
        "3",
        "async, several records per key (1,100 over 1,000 keys, L=64) / ideal",
        "async.thread.per_key.1100/1000",
        True,
        0.9,
    ),
    Goal(
        "3",
        "async, several records per key (3,000 over 500 keys, L=64) / ideal",
        "async.thread.per_key.3000/500",
        True,
        0.9,
    ),
    Goal(
        "4",
        "fan-out to three 200 ms calls, local runner: run latency in calls",
        "fan_out.local",
        False,
        1.5,
    ),
    Goal(
        "4",
        "fan-out to three 200 ms calls, MiniCluster: run latency in calls",
        "fan_out.thread",
        False,
        1.5,
    ),
    Goal(
        "5",
        "time to first output, agent (defaults) - raw, s",
        "startup.thread.first_output_delta_s.agent",
        False,
        0.5,
    ),
    Goal(
        "5",
        "process-tree peak RSS, agent (defaults) / raw",
        "startup.thread.peak_rss_ratio.agent",
        False,
        1.10,
    ),
)

INFO = (
    (
        "the agent's action code alone, no framework / raw (goal 1's ceiling)",
        "state.thread.code_over_raw",
    ),
    (
        "async, 64 in flight, async def calls (on the engine's event loop) / ideal",
        "async.thread.coroutine.L64",
    ),
    (
        "async, 256 in flight, async def calls (on the engine's event loop) / ideal",
        "async.thread.coroutine.L256",
    ),
    (
        "resume lag p50, ms: 50 ms calls at 200 records/s (62% of the default capacity)",
        "latency.thread.resume_p50_ms.200",
    ),
)


def load(path: Path) -> dict[str, dict]:
    """The last entry of each figure id in ``path``."""
    figures: dict[str, dict] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                entry = json.loads(line)
                figures[entry["figure"]] = entry
    return figures


def evaluate(goal: Goal, figures: dict[str, dict]) -> tuple[float | None, str]:
    """The goal's value (None if not measured) and what it was measured on."""
    if isinstance(goal.figure, tuple):
        top, bottom = (figures.get(name) for name in goal.figure)
        if top is None or bottom is None or not bottom["value"]:
            return None, ""
        return top["value"] / bottom["value"], f"{top['detail']}; {bottom['detail']}"
    entry = figures.get(goal.figure)
    return (None, "") if entry is None else (entry["value"], entry["detail"])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else Path(os.environ.get(FIGURES_ENV) or DEFAULT_FIGURES)
    figures = load(path)
    print(f"== issue 13 goals, from {path} ==")
    rows = []
    met = measured = 0
    for goal in GOALS:
        value, detail = evaluate(goal, figures)
        compare: Callable[[float, float], bool] = operator.ge if goal.at_least else operator.le
        target = f"{'>=' if goal.at_least else '<='} {goal.target:g}"
        what = f"{goal.number}: {goal.what}"
        if value is None:
            rows.append((what, "not measured", target, "", ""))
            continue
        measured += 1
        ok = compare(value, goal.target)
        met += ok
        rows.append((what, f"{value:.2f}", target, "MET" if ok else "NOT MET", detail))
    for what, name in INFO:
        entry = figures.get(name)
        if entry is not None:
            rows.append((f"   {what}", f"{entry['value']:.2f}", "", "", entry["detail"]))
    print(table(["goal: figure", "value", "target", "", "measured on"], rows))
    print(
        f"{met} of {measured} measured figures meet their goal; "
        f"{len(GOALS) - measured} of {len(GOALS)} not measured"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
