"""``flink-agents demo``: the support-triage agent over the bundled tickets, with a summary."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from flink_agents.cli._batch import BatchReport, run_json_lines
from flink_agents.plan import load_plan

DEFAULT_PLAN = Path("plans/support_triage.yaml")
DEFAULT_DATA = Path("data/support_tickets.jsonl")
DEFAULT_OUT = Path("out/demo")


def run_demo(
    plan_path: Path = DEFAULT_PLAN,
    data_path: Path = DEFAULT_DATA,
    out_dir: Path = DEFAULT_OUT,
    console: Console | None = None,
) -> BatchReport:
    """Run the demo and print its summary; returns the report for tests."""
    console = console or Console()
    plan = load_plan(plan_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    output_path, error_path = out_dir / "outputs.jsonl", out_dir / "errors.jsonl"
    total = sum(1 for line in data_path.read_text(encoding="utf-8").splitlines() if line.strip())
    console.print(
        f"[bold]flink-agents demo[/bold]: agent [cyan]{plan.name}[/cyan] "
        f"({len(plan.actions)} actions) from {plan_path}, local runner, input {data_path}"
    )
    with (
        output_path.open("w", encoding="utf-8") as output,
        error_path.open("w", encoding="utf-8") as errors,
        Progress(
            TextColumn("records"), BarColumn(), MofNCompleteColumn(), console=console
        ) as progress,
    ):
        task = progress.add_task("records", total=total)
        report = run_json_lines(
            plan, data_path, "user", output, errors, lambda: progress.advance(task)
        )
    report.output_path, report.error_path = output_path, error_path
    _print_summary(console, report)
    return report


def _print_summary(console: Console, report: BatchReport) -> None:
    runner = report.runner
    runs = sum(runner.runs(key) for key in runner.keys)
    console.print()
    console.print(
        f"records read [bold]{report.records}[/bold]  ·  rejected {report.rejected}  ·  "
        f"runs {runs}  ·  actions executed {runner.steps}  ·  outputs {report.outputs}  ·  "
        f"failed runs {report.failed_runs}  ·  keys {len(runner.keys)}  ·  "
        f"{report.elapsed * 1000:.0f} ms"
    )
    table = Table(title="Per key: runs, outputs and short-term memory after the last run")
    table.add_column("key", style="cyan")
    table.add_column("runs", justify="right")
    table.add_column("outputs", justify="right")
    table.add_column("short-term memory")
    for key in sorted(runner.keys, key=str):
        memory = json.dumps(runner.short_term_memory(key), separators=(", ", ": "))
        table.add_row(str(key), str(runner.runs(key)), str(runner.outputs_per_key[key]), memory)
    console.print(table)
    console.print(f"outputs: {report.output_path}   error output: {report.error_path}")
    if report.rejected or report.failed_runs:
        console.print(
            f"[yellow]{report.rejected} record(s) rejected and {report.failed_runs} run(s) "
            f"failed; each is in the error output with its reason.[/yellow]"
        )
