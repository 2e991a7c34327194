"""``flink-agents demo``: the support-triage agent over the bundled tickets, with a summary.

By default the main job runs in a Flink MiniCluster (real keyed state, checkpoints and file
sinks); ``--local`` runs the same plan with the in-process local runner instead.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from flink_agents.cli._batch import run_json_lines
from flink_agents.plan import load_plan

DEFAULT_PLAN = Path("plans/support_triage.yaml")
DEFAULT_DATA = Path("data/support_tickets.jsonl")
DEFAULT_OUT = Path("out/demo")
KEY_FIELD = "user"


def run_demo(
    plan_path: Path = DEFAULT_PLAN,
    data_path: Path = DEFAULT_DATA,
    out_dir: Path = DEFAULT_OUT,
    console: Console | None = None,
    local: bool = False,
) -> dict[str, Any]:
    """Run the demo and print its summary; returns the summary's figures."""
    console = console or Console()
    plan = load_plan(plan_path)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    where = "local runner" if local else "Flink MiniCluster"
    console.print(
        f"[bold]flink-agents demo[/bold]: agent [cyan]{plan.name}[/cyan] "
        f"({len(plan.actions)} actions) from {plan_path} on the {where}, input {data_path}"
    )
    started = time.perf_counter()
    run = _run_local if local else _run_minicluster
    summary = run(plan, data_path.resolve(), out_dir.resolve(), console)
    summary["elapsed"] = time.perf_counter() - started
    summary["records"] = sum(1 for line in data_path.open(encoding="utf-8") if line.strip())
    _print_summary(console, summary)
    return summary


def _run_minicluster(plan: Any, data: Path, out: Path, console: Console) -> dict[str, Any]:
    from pyflink.datastream import StreamExecutionEnvironment

    from flink_agents.runtime.flink import JobPaths, build_agent_job, read_json_files

    paths = JobPaths(data, out / "outputs", out / "errors", out / "memory")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    build_agent_job(env, plan, paths, KEY_FIELD, 1000, memory_snapshots=True)
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console
    ) as progress:
        task = progress.add_task("submitting the job")
        client = env.execute_async(f"flink-agents demo: {plan.name}")
        result = client.get_job_execution_result()
        while not result.done():
            try:
                status = client.get_job_status().result()
            except Exception:  # the job just ended and its MiniCluster is shutting down
                status = "ENDING"
            written = _lines_written(paths.output)
            progress.update(task, description=f"job {status}: {written} outputs written so far")
            time.sleep(0.25)
        result.result()
        progress.update(task, description="job FINISHED")
    errors = read_json_files(paths.errors)
    snapshots: dict[Any, dict[str, Any]] = {}
    for snapshot in read_json_files(paths.memory):
        known = snapshots.get(snapshot["key"])
        if known is None or known["run_sequence"] < snapshot["run_sequence"]:
            snapshots[snapshot["key"]] = snapshot
    outputs = read_json_files(paths.output)
    return {
        "outputs": len(outputs),
        "outputs_per_key": _count_by_key(outputs),
        "rejected": sum(e["kind"] == "rejected" for e in errors),
        "failed_runs": sum(e["kind"] == "failed_run" for e in errors),
        "runs_per_key": {k: s["run_sequence"] for k, s in snapshots.items()},
        "memory_per_key": {k: s["short_term_memory"] for k, s in snapshots.items()},
        "output_dir": paths.output,
        "error_dir": paths.errors,
    }


def _run_local(plan: Any, data: Path, out: Path, console: Console) -> dict[str, Any]:
    output_path, error_path = out / "outputs.jsonl", out / "errors.jsonl"
    with (
        output_path.open("w", encoding="utf-8") as output,
        error_path.open("w", encoding="utf-8") as errors,
    ):
        report = run_json_lines(plan, data, KEY_FIELD, output, errors)
    runner = report.runner
    return {
        "outputs": report.outputs,
        "outputs_per_key": dict(runner.outputs_per_key),
        "rejected": report.rejected,
        "failed_runs": report.failed_runs,
        "runs_per_key": {key: runner.runs(key) for key in runner.keys},
        "memory_per_key": {key: runner.short_term_memory(key) for key in runner.keys},
        "output_dir": output_path,
        "error_dir": error_path,
    }


def _lines_written(directory: Path) -> int:
    """Lines in the sink's files, committed or still in progress (for the progress line)."""
    if not directory.exists():
        return 0
    return sum(path.read_bytes().count(b"\n") for path in directory.rglob("*") if path.is_file())


def _count_by_key(outputs: list[dict[str, Any]]) -> dict[Any, int]:
    counts: dict[Any, int] = {}
    for output in outputs:
        counts[output.get(KEY_FIELD)] = counts.get(output.get(KEY_FIELD), 0) + 1
    return counts


def _print_summary(console: Console, summary: dict[str, Any]) -> None:
    runs = summary["runs_per_key"]
    console.print()
    console.print(
        f"records in [bold]{summary['records']}[/bold]  ·  rejected {summary['rejected']}  ·  "
        f"runs {sum(runs.values())}  ·  keys {len(runs)}  ·  outputs "
        f"[bold]{summary['outputs']}[/bold]  ·  failed runs {summary['failed_runs']}  ·  "
        f"elapsed {summary['elapsed']:.1f} s"
    )
    table = Table(title="Per key: runs, outputs and short-term memory after the last run")
    table.add_column("key", style="cyan")
    table.add_column("runs", justify="right")
    table.add_column("outputs", justify="right")
    table.add_column("short-term memory")
    for key in sorted(runs, key=str):
        memory = json.dumps(summary["memory_per_key"][key], separators=(", ", ": "))
        outputs = summary["outputs_per_key"].get(key, 0)
        table.add_row(str(key), str(runs[key]), str(outputs), memory)
    console.print(table)
    console.print(f"outputs: {summary['output_dir']}   error output: {summary['error_dir']}")
    if summary["rejected"] or summary["failed_runs"]:
        console.print(
            f"[yellow]{summary['rejected']} record(s) rejected and {summary['failed_runs']} "
            "run(s) failed; each is in the error output with its reason.[/yellow]"
        )
