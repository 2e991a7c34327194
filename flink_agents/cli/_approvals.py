"""``flink-agents demo --approvals``: the refund agent, with people's approvals from a second
input, and a summary of its waits, approvals, timeouts and follow-ups.

The agent (``plans/refunds.yaml``, ``flink_agents/examples/refunds.py``) approves small
refunds itself, has a chat model draft a request to a person for larger ones and waits for
the answer (``ctx.wait_for``), escalates when none comes in four hours, and schedules a
follow-up after each approval. The requests come from ``data/refund_requests.jsonl``, the
approvals from ``data/refund_approvals.jsonl`` (``with_signals``). In a Flink MiniCluster by
default (two file sources: an approval may reach its customer before the request, which the
agent handles), with ``--local`` in the local runner (the approvals after the requests).
The end of the bounded input is where unanswered waits time out and the follow-ups fire,
as the clock would move on in a job that runs for days. The model is the configured one, or
the scripted TEST STAND-IN, which the output says.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from flink_agents.cli._batch import Signals, run_json_lines
from flink_agents.cli._demo import (
    _final_metrics,
    _job_name,
    _model_for,
    _print_model,
    demo_options,
    execute_with_progress,
    minicluster_environment,
    read_lines,
    with_model,
)
from flink_agents.examples import refunds
from flink_agents.plan import AgentPlan, load_plan
from flink_agents.runtime import AgentOptions

PLAN = Path("plans/refunds.yaml")
REQUESTS = Path("data/refund_requests.jsonl")
APPROVALS = Path("data/refund_approvals.jsonl")
OUT = Path("out/demo-approvals")
KEY_FIELD = "customer"


def run_approvals_demo(
    out_dir: Path = OUT,
    console: Console | None = None,
    local: bool = False,
    plan_path: Path = PLAN,
    requests: Path = REQUESTS,
    approvals: Path = APPROVALS,
) -> dict[str, Any]:
    """Run the refund agent over the requests and approvals, print its summary; returns the
    summary's figures."""
    console = console or Console()
    plan = load_plan(plan_path)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    where = "local runner" if local else "Flink MiniCluster"
    console.print(
        f"[bold]flink-agents demo --approvals[/bold]: agent [cyan]{plan.name}[/cyan] on the "
        f"{where}, requests {requests}, approvals {approvals}"
    )
    with _model_for(plan, refunds.stand_in_rules()) as model:
        if model is not None:
            plan = with_model(plan, model)
            _print_model(console, model, drafts="the requests to people")
        started = time.perf_counter()
        run = _run_local if local else _run_minicluster
        summary = run(plan, requests.resolve(), approvals.resolve(), out_dir.resolve(), console)
        summary["elapsed"] = time.perf_counter() - started
        summary["stand_in"] = model is not None and model.stand_in
    _print_summary(console, summary)
    return summary


def _run_local(
    plan: AgentPlan, requests: Path, approvals: Path, out: Path, console: Console
) -> dict[str, Any]:
    output_path, error_path = out / "outputs.jsonl", out / "errors.jsonl"
    log = f"sqlite://{out / 'action-log.db'}"
    options = AgentOptions(action_log=log, **demo_options(out, _job_name()))
    signals = Signals(approvals, KEY_FIELD, refunds.Approval)
    with (
        output_path.open("w", encoding="utf-8") as output,
        error_path.open("w", encoding="utf-8") as errors,
    ):
        report = run_json_lines(
            plan, requests, KEY_FIELD, output, errors, options=options, signals=signals
        )
    return {
        "outputs": read_lines(output_path),
        "errors": read_lines(error_path),
        "metrics": report.runner.metrics.snapshot(),
        "output_dir": output_path,
    }


def _run_minicluster(
    plan: AgentPlan, requests: Path, approvals: Path, out: Path, console: Console
) -> dict[str, Any]:
    from flink_agents.runtime.flink import JobPaths, build_agent_job, read_json_files

    paths = JobPaths(requests, out / "outputs", out / "errors", signals=approvals)
    env = minicluster_environment()
    build_agent_job(
        env,
        plan,
        paths,
        KEY_FIELD,
        1000,
        signal_type=refunds.Approval,
        **demo_options(out, _job_name()),
    )
    execute_with_progress(env, f"flink-agents demo --approvals: {plan.name}", paths.output, console)
    return {
        "outputs": read_json_files(paths.output),
        "errors": read_json_files(paths.errors),
        "metrics": _final_metrics(out / "event-log"),
        "output_dir": paths.output,
    }


def decisions(outputs: list[dict[str, Any]]) -> dict[str, str]:
    """Each refund's decision (``status``), by refund, follow-ups left out."""
    return {o["refund"]: o["status"] for o in outputs if o.get("status") != "follow-up"}


def counts(summary: dict[str, Any]) -> dict[str, int]:
    """What the summary counts: decisions by kind, follow-ups, and the waits' figures (how
    many runs waited depends on whether an approval came before its request)."""
    statuses = Counter(_kind(o["status"]) for o in summary["outputs"])
    metrics = summary["metrics"]
    return {
        "requests": sum(1 for o in summary["outputs"] if o["status"] != "follow-up"),
        "auto-approved": statuses["auto-approved"],
        "approved by a person": statuses["approved"],
        "refused by a person": statuses["refused"],
        "escalated (no answer in 4 h)": statuses["escalated"],
        "follow-ups sent": statuses["follow-up"],
        "waits": int(metrics.get("numOfWaits", 0)),
        "waits answered": int(metrics.get("numOfWaitsAnswered", 0)),
        "waits timed out": int(metrics.get("numOfWaitsTimedOut", 0)),
        "approvals before their request": int(
            metrics.get("numOfSignals", 0) - metrics.get("numOfWaitsAnswered", 0)
        ),
        "model calls": int(
            sum(v for k, v in metrics.items() if k.startswith("model.") and "numOfRequests" in k)
        ),
    }


def _kind(status: str) -> str:
    """``approved``, ``refused``, ``auto-approved``, ``escalated`` or ``follow-up``."""
    if status == "approved by the agent":
        return "auto-approved"
    return status.split(":")[0].split(" ")[0]


def _print_summary(console: Console, summary: dict[str, Any]) -> None:
    table = Table(title="Refund decisions")
    for column in ("refund", "customer", "amount", "decision"):
        table.add_column(column, style="cyan" if column == "refund" else None)
    outputs = sorted(summary["outputs"], key=lambda o: (o["refund"], o["status"] == "follow-up"))
    for output in outputs:
        amount = output.get("amount")
        table.add_row(
            output["refund"],
            output["customer"],
            "" if amount is None else f"{amount:.2f}",
            output["status"],
        )
    console.print()
    console.print(table)
    figures = counts(summary)
    console.print("  ·  ".join(f"{name} [bold]{value}[/bold]" for name, value in figures.items()))
    if summary["stand_in"]:
        console.print("the requests to people were drafted by the scripted TEST STAND-IN")
    if summary["errors"]:
        console.print(f"[yellow]{len(summary['errors'])} record(s) in the error output[/yellow]")
    console.print(f"elapsed {summary['elapsed']:.1f} s  ·  outputs: {summary['output_dir']}")
