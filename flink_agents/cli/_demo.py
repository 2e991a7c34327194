"""``flink-agents demo``: the support-triage agent over the bundled tickets, with a summary.

By default the main job runs in a Flink MiniCluster (real keyed state, checkpoints and file
sinks); ``--local`` runs the same plan with the in-process local runner instead.

The default plan drafts a reply to each ticket with a chat model. With ``OPENAI_API_KEY`` set
(and optionally ``OPENAI_BASE_URL`` and ``OPENAI_MODEL``) that is the configured model;
without it the demo starts the scripted LLM server on loopback (a thread of this process)
and says, before and after the run, that a TEST STAND-IN answered, not a model.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from flink_agents.api import (
    ChatMessage,
    ChatModelError,
    FlinkAgentsError,
    MessageRole,
    ResourceType,
)
from flink_agents.api.internal import import_ref
from flink_agents.cli._batch import run_json_lines
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.integrations.chat.internal import (
    API_KEY_ENV,
    BASE_URL_ENV,
    DEFAULT_BASE_URL,
    MODEL_ENV,
    host_of,
)
from flink_agents.plan import AgentPlan, load_plan
from flink_agents.runtime import AgentOptions

DEFAULT_PLAN = Path("plans/support_replies.yaml")
DEFAULT_DATA = Path("data/support_tickets.jsonl")
DEFAULT_OUT = Path("out/demo")
KEY_FIELD = "user"
DEFAULT_MODEL = "gpt-4o-mini"
STAND_IN_PLACEHOLDER_KEY = "stand-in-takes-any-key"
"""The stand-in's key: any value works, so it is no secret and sits in the plan as it is (an
environment reference would have to exist in the worker, which in thread mode is the JVM
started before the demo set it)."""
"""The stand-in takes any key; the plan still names one by reference, as for a real model."""
REPLIES_SHOWN = 8


class ModelUnavailableError(FlinkAgentsError):
    """The model configured in the environment does not answer; the demo does not start."""


@dataclass(frozen=True)
class DemoModel:
    """The model the demo's chat resources call.

    Attributes:
        name: the model name sent with each request.
        base_url: the endpoint.
        key_env: the environment variable holding the key (the plan names only this); None
            for the stand-in, which takes any key and gets a literal placeholder.
        server: the scripted stand-in when no key is configured, else None.
    """

    name: str
    base_url: str
    key_env: str | None
    server: Any = None

    @property
    def stand_in(self) -> bool:
        return self.server is not None

    @property
    def host(self) -> str:
        return host_of(self.base_url)


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
    with _model_for(plan) as model:
        if model is not None:
            plan = with_model(plan, model)
            _print_model(console, model)
        started = time.perf_counter()
        run = _run_local if local else _run_minicluster
        summary = run(plan, data_path.resolve(), out_dir.resolve(), console)
        summary["elapsed"] = time.perf_counter() - started
        summary["model"] = _model_summary(model, summary["replies"])
    summary["records"] = sum(1 for line in data_path.open(encoding="utf-8") if line.strip())
    _print_summary(console, summary)
    return summary


def choose_model(environ: Mapping[str, str] | None = None) -> DemoModel | None:
    """The configured model, or None when no key is set (the stand-in is then used)."""
    environ = os.environ if environ is None else environ
    if not environ.get(API_KEY_ENV):
        return None
    return DemoModel(
        name=environ.get(MODEL_ENV) or DEFAULT_MODEL,
        base_url=environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL,
        key_env=API_KEY_ENV,
    )


STAND_IN_PRICES = {"input": 0.15, "output": 0.6}
"""What the demo prices the stand-in's tokens at, per million: a small hosted model's."""


def with_model(plan: AgentPlan, model: DemoModel) -> AgentPlan:
    """``plan`` with its OpenAI-compatible chat models pointed at ``model``.

    A real key stays an environment reference: the plan goes to Flink's workers as it is.
    """
    api_key = {"env": model.key_env} if model.key_env else STAND_IN_PLACEHOLDER_KEY
    # The stand-in is priced like a small hosted model, so that the summary shows what its
    # calls would have cost; a real model's price is the user's to give (model-prices).
    prices = {"prices": STAND_IN_PRICES} if model.stand_in else {}
    resources = tuple(
        spec.model_copy(
            update={
                "args": {
                    **spec.args,
                    "model": model.name,
                    "base_url": model.base_url,
                    "api_key": api_key,
                    **prices,
                }
            }
        )
        if _is_openai_chat(spec)
        else spec
        for spec in plan.resources
    )
    return plan.model_copy(update={"resources": resources})


def _is_openai_chat(spec: Any) -> bool:
    return spec.type == ResourceType.CHAT_MODEL and import_ref(spec.provider) is OpenAIChatModel


@contextmanager
def _model_for(plan: AgentPlan, rules: list[Any] | None = None) -> Iterator[DemoModel | None]:
    """The model for the plan's chat resources; starts (and then stops) the stand-in, with
    ``rules`` (default: the support replies')."""
    if not any(_is_openai_chat(spec) for spec in plan.resources):
        yield None
        return
    configured = choose_model()
    if configured is not None:
        check_model(configured)
        yield configured
        return
    from flink_agents.examples.support_replies import stand_in_rules
    from flink_agents.testing.llm_server import STAND_IN_MODEL, ScriptedLLMServer

    server = ScriptedLLMServer(stand_in_rules() if rules is None else rules).start()
    try:
        yield DemoModel(STAND_IN_MODEL, server.base_url, None, server)
    finally:
        server.stop()


def check_model(model: DemoModel) -> None:
    """One short call before the job, so a wrong key or URL fails at once and clearly
    rather than as one failed run per ticket.

    Raises:
        ModelUnavailableError: the model does not answer.
    """
    client = OpenAIChatModel(
        model.name, base_url=model.base_url, api_key_env=model.key_env, timeout=30, max_retries=1
    )
    try:
        client.chat([ChatMessage(role=MessageRole.USER, content="Reply with the word OK.")])
    except ChatModelError as error:
        raise ModelUnavailableError(
            f"the demo's model does not answer ({error}); check {API_KEY_ENV}, "
            f"{BASE_URL_ENV} and {MODEL_ENV}, or unset {API_KEY_ENV} to use the scripted "
            "stand-in"
        ) from None
    finally:
        client.close()


def _print_model(console: Console, model: DemoModel, drafts: str = "the replies") -> None:
    if model.stand_in:
        console.print(
            f"[bold yellow]No {API_KEY_ENV} is set: a scripted TEST STAND-IN on "
            f"{model.base_url} drafts {drafts}, NOT a real model.[/bold yellow] Set "
            f"{API_KEY_ENV} (and optionally {BASE_URL_ENV}, {MODEL_ENV}) to use one."
        )
    else:
        console.print(
            f"model: [cyan]{model.name}[/cyan] at {model.host} drafts {drafts} "
            f"(from {API_KEY_ENV}, {BASE_URL_ENV}, {MODEL_ENV})"
        )


def _model_summary(model: DemoModel | None, replies: list[dict[str, Any]]) -> dict[str, Any] | None:
    if model is None:
        return None
    return {
        "name": model.name,
        "host": model.host,
        "stand_in": model.stand_in,
        "calls": model.server.call_count("chat") if model.stand_in else None,
        "tokens": sum(int(r.get("reply_tokens") or 0) for r in replies),
    }


def demo_options(out: Path, job: str) -> dict[str, Any]:
    """The agent options the demos run with, on either runner: a failed run (a model that
    keeps failing, say) goes to the error output, instead of restarting a Flink job from
    its checkpoint forever; the event log under ``out``; the action log's job ``job``."""
    return {
        "error_policy": "error-output",
        "event_log_level": "standard",
        "event_log_dir": str(out / "event-log"),
        "action_log_job": job,
    }


def minicluster_environment() -> Any:
    """The demos' MiniCluster environment, at parallelism 2, with the project's logging
    set before the JVM starts (no environment, so no API key, in Flink's log)."""
    from pyflink.datastream import StreamExecutionEnvironment

    from flink_agents.runtime.flink import use_project_logging

    use_project_logging()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    return env


def read_lines(path: Path) -> list[Any]:
    """The records of a JSON-lines file the local runner wrote."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _run_minicluster(plan: Any, data: Path, out: Path, console: Console) -> dict[str, Any]:
    from flink_agents.runtime.flink import JobPaths, build_agent_job, read_json_files

    job = _job_name()
    paths = JobPaths(data, out / "outputs", out / "errors", out / "memory")
    env = minicluster_environment()
    build_agent_job(
        env, plan, paths, KEY_FIELD, 1000, memory_snapshots=True, **demo_options(out, job)
    )
    execute_with_progress(env, f"flink-agents demo: {plan.name}", paths.output, console)
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
        "replies": _replies(outputs),
        "errors": errors,
        "output_dir": paths.output,
        "error_dir": paths.errors,
        "metrics": _final_metrics(out / "event-log"),
        "event_log": out / "event-log",
        "job": job,
        "log": None,
    }


def execute_with_progress(env: Any, name: str, output: Path, console: Console) -> None:
    """Run the job, showing its status and the outputs written so far until it ends.

    Raises:
        Exception: the job failed (PyFlink's error).
    """
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console
    ) as progress:
        task = progress.add_task("submitting the job")
        client = env.execute_async(name)
        result = client.get_job_execution_result()
        while not result.done():
            try:
                status = client.get_job_status().result()
            except Exception:  # the job just ended and its MiniCluster is shutting down
                status = "ENDING"
            written = _lines_written(output)
            progress.update(task, description=f"job {status}: {written} outputs written so far")
            time.sleep(0.25)
        result.result()
        progress.update(task, description="job FINISHED")


def _job_name() -> str:
    """The demo run's name in the action log, new for every run (a pinned name would make
    the next run replay this one's actions), for ``flink-agents history``."""
    return "demo-" + time.strftime("%Y%m%d-%H%M%S")


def _final_metrics(event_log: Path) -> dict[str, float]:
    """Every subtask's final metric values (the ``metrics`` record each writes to its event
    log when it closes), summed."""
    totals: dict[str, float] = {}
    for path in sorted(event_log.glob("*/events.jsonl*")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("kind") != "metrics":
                continue
            for name, value in record["values"].items():
                if isinstance(value, int | float) and "PerSec" not in name:
                    totals[name] = totals.get(name, 0) + value
    return totals


def _usage_line(metrics: dict[str, float], event_log: Path | None) -> str:
    """LLM calls, tokens, durable calls, replays and where the event log is."""

    def total(suffix: str) -> int:
        return int(
            sum(v for k, v in metrics.items() if k.startswith("model.") and k.endswith(suffix))
        )

    line = (
        f"LLM calls {total('.numOfRequests')} (tokens: {total('.promptTokens')} prompt, "
        f"{total('.completionTokens')} completion)  ·  durable calls "
        f"{int(metrics.get('numOfDurableCalls', 0))}  ·  replayed: "
        f"{int(metrics.get('numOfActionsReplayed', 0))} actions, "
        f"{int(metrics.get('numOfDurableCallsReplayed', 0))} calls"
    )
    if event_log is not None:
        line += f"\nevent log: {event_log}"
    return line


def _spend_line(metrics: dict[str, float]) -> str:
    """What each chat model resource spent: calls, tokens and, where it has a price, cost."""
    models = sorted(
        name.split(".")[1]
        for name in metrics
        if name.startswith("model.") and name.endswith(".numOfRequests")
    )
    spent = []
    for model in models:
        tokens = metrics.get(f"model.{model}.promptTokens", 0)
        tokens += metrics.get(f"model.{model}.completionTokens", 0)
        cost = metrics.get(f"model.{model}.costMicros", 0) / 1_000_000
        priced = f", cost {cost:.6f}" if cost else " (no price: set the model-prices option)"
        calls = int(metrics[f"model.{model}.numOfRequests"])
        spent.append(f"{model}: {calls} calls, {int(tokens)} tokens{priced}")
    return "spend by model: " + "; ".join(spent) if spent else ""


def _run_local(plan: Any, data: Path, out: Path, console: Console) -> dict[str, Any]:
    output_path, error_path = out / "outputs.jsonl", out / "errors.jsonl"
    with (
        output_path.open("w", encoding="utf-8") as output,
        error_path.open("w", encoding="utf-8") as errors,
    ):
        job, log = _job_name(), f"sqlite://{out / 'action-log.db'}"
        options = AgentOptions(action_log=log, **demo_options(out, job))
        report = run_json_lines(plan, data, KEY_FIELD, output, errors, options=options)
    runner = report.runner
    outputs, errors = read_lines(output_path), read_lines(error_path)
    return {
        "outputs": report.outputs,
        "outputs_per_key": dict(runner.outputs_per_key),
        "rejected": report.rejected,
        "failed_runs": report.failed_runs,
        "runs_per_key": {key: runner.runs(key) for key in runner.keys},
        "memory_per_key": {key: runner.short_term_memory(key) for key in runner.keys},
        "replies": _replies(outputs),
        "errors": errors,
        "output_dir": output_path,
        "error_dir": error_path,
        "metrics": runner.metrics.snapshot(),
        "event_log": out / "event-log",
        "job": job,
        "log": log,
    }


def _replies(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The outputs that carry a model's reply, in ticket order."""
    return sorted((o for o in outputs if "reply" in o), key=lambda o: str(o.get("ticket")))


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
    if summary.get("model") is not None:
        _print_replies(console, summary["model"], summary["replies"])
    console.print(_usage_line(summary.get("metrics", {}), summary.get("event_log")))
    spend = _spend_line(summary.get("metrics", {}))
    if spend:
        console.print(spend)
    if summary.get("job") and runs:
        key = next(iter(sorted(runs, key=str)))
        log = f" --log {summary['log']}" if summary.get("log") else ""
        console.print(
            f"one key's history: flink-agents history --job {summary['job']} --key {key}{log}"
        )
    console.print(f"outputs: {summary['output_dir']}   error output: {summary['error_dir']}")
    if summary["rejected"] or summary["failed_runs"]:
        console.print(
            f"[yellow]{summary['rejected']} record(s) rejected and {summary['failed_runs']} "
            "run(s) failed; each is in the error output with its reason.[/yellow]"
        )
        failed = [e for e in summary.get("errors", []) if e.get("kind") == "failed_run"]
        if failed:
            console.print(Text(f"first failure: {failed[0].get('error', failed[0])}"))


def _print_replies(console: Console, model: dict[str, Any], replies: list[dict[str, Any]]) -> None:
    if model["stand_in"]:
        who = "the scripted TEST STAND-IN (not a real model)"
        calls = f"{model['calls']} calls to the stand-in"
    else:
        who = f"{model['name']} at {model['host']}"
        calls = f"{len(replies)} model calls"
    table = Table(title=f"Replies drafted by {who}: {calls}, {model['tokens']} tokens")
    for column in ("ticket", "user", "route"):
        table.add_column(column, style="cyan" if column == "ticket" else None)
    table.add_column("reply")
    for reply in replies[:REPLIES_SHOWN]:
        cells = [reply.get(field) for field in ("ticket", "user", "route", "reply")]
        table.add_row(*(Text(str(cell)) for cell in cells))
    console.print(table)
    if len(replies) > REPLIES_SHOWN:
        console.print(f"... and {len(replies) - REPLIES_SHOWN} more replies in the outputs")
