"""The ``flink-agents`` command: demo, run, validate and compile agents, load knowledge,
look into and prune the action log."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from flink_agents.api import PlanError
from flink_agents.api.internal import RefError, import_ref
from flink_agents.cli import _forget, _history, _knowledge, _log
from flink_agents.plan import compile_agent, load_plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="flink-agents", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser(
        "demo", help="run the support-triage demo on the bundled data in a Flink MiniCluster"
    )
    demo.add_argument("--plan", type=Path, default=None)
    demo.add_argument("--data", type=Path, default=None)
    demo.add_argument("--out", type=Path, default=None, help="output directory")
    demo.add_argument("--local", action="store_true", help="use the local runner, not Flink")
    demo.add_argument(
        "--approvals",
        action="store_true",
        help="run the refund agent instead: it waits for people's approvals from a second "
        "input, escalates without one, and follows up",
    )

    run = commands.add_parser("run", help="run a plan over a JSON-lines file (local runner)")
    run.add_argument("plan", type=Path, help="plan file (.yaml, .yml or .json)")
    run.add_argument("input", type=Path, help="JSON-lines input, one record per line")
    run.add_argument("--key", required=True, help="the record field that keys the runs")
    run.add_argument("--output", type=Path, help="outputs file (default: standard output)")
    run.add_argument("--errors", type=Path, help="error output file (default: standard error)")
    run.add_argument(
        "--error-policy",
        choices=["error-output", "retry", "fail"],
        default="error-output",
        help="what a failing action does: its run goes to the error output (default), it is "
        "retried with backoff first, or the command stops",
    )

    validate = commands.add_parser("validate", help="check a plan file and the code it names")
    validate.add_argument("plan", type=Path)

    compile_ = commands.add_parser("compile", help="compile an Agent class into a plan")
    compile_.add_argument("agent", help="the Agent class as module:ClassName")
    compile_.add_argument("-o", "--output", type=Path, help="plan file (.yaml or .json)")

    cluster = commands.add_parser(
        "cluster", help="start or stop a local standalone Flink cluster (conf/config.yaml)"
    )
    cluster.add_argument("action", choices=["up", "down", "status"])
    cluster.add_argument("--work-dir", type=Path, default=Path(".flink"))
    cluster.add_argument(
        "--config",
        type=Path,
        default=None,
        help="Flink config.yaml whose keys win over the defaults (default: conf/config.yaml "
        "if there is one); up only",
    )
    cluster.add_argument(
        "--rest-port",
        type=int,
        default=None,
        help="the REST API's port, over the config file's rest.port (0 picks a free one); up only",
    )

    _knowledge.add_parser(commands)
    _history.add_parser(commands)
    _log.add_parser(commands)
    _forget.add_parser(commands)

    llm = commands.add_parser(
        "llm-server", help="serve a scripted OpenAI-compatible TEST STAND-IN (not a real model)"
    )
    llm.add_argument("--host", default="127.0.0.1")
    llm.add_argument("--port", type=int, default=0, help="0 picks a free port")
    llm.add_argument("--script", type=Path, help="rules file (.yaml or .json)")
    llm.add_argument("--latency", type=float, default=None, help="seconds added to every answer")
    llm.add_argument(
        "--requests-per-minute",
        type=int,
        default=None,
        help="answer 429 (with Retry-After) to chat requests over this rate",
    )

    args = parser.parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except PlanError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _cmd_demo(args: argparse.Namespace) -> int:
    from flink_agents.cli import _demo as demo

    if args.approvals:
        if args.plan or args.data:
            print("error: --approvals runs its own plan and data", file=sys.stderr)
            return 2
        from flink_agents.cli._approvals import OUT, run_approvals_demo

        try:
            run_approvals_demo(args.out or OUT, local=args.local)
        except demo.ModelUnavailableError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        return 0
    try:
        demo.run_demo(
            args.plan or demo.DEFAULT_PLAN,
            args.data or demo.DEFAULT_DATA,
            args.out or demo.DEFAULT_OUT,
            local=args.local,
        )
    except demo.ModelUnavailableError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from flink_agents.api import ActionExecutionError, FlinkAgentsError
    from flink_agents.cli._batch import run_json_lines
    from flink_agents.runtime import load_options
    from flink_agents.runtime.action_log import ActionLogError

    plan = load_plan(args.plan)
    try:
        options = load_options({"error_policy": args.error_policy})
        # Checked before any output file is created: a missing input costs nothing.
        with args.input.open("rb"):
            pass
    except (OSError, FlinkAgentsError) as error:
        print(f"error: {_one_line(error)}", file=sys.stderr)
        return 2
    output = args.output.open("w", encoding="utf-8") if args.output else sys.stdout
    errors = args.errors.open("w", encoding="utf-8") if args.errors else sys.stderr
    try:
        report = run_json_lines(plan, args.input, args.key, output, errors, options=options)
    except OSError as error:  # the input became unreadable while running
        print(f"error: {_one_line(error)}", file=sys.stderr)
        return 2
    except ActionLogError as error:  # names the log (password redacted): not a failed run
        print(f"error: {_one_line(error)}", file=sys.stderr)
        return 2
    except ActionExecutionError as error:  # --error-policy fail
        print(f"error: {_one_line(error)}", file=sys.stderr)
        return 1
    finally:
        for stream in (output, errors):
            if stream not in (sys.stdout, sys.stderr):
                stream.close()
    return 1 if report.failed_runs else 0


def _one_line(error: BaseException) -> str:
    """An error as one line: ``OSError``s name the file and the reason."""
    if isinstance(error, OSError) and error.filename is not None:
        return f"cannot read {error.filename}: {error.strerror or error}"
    return " ".join(str(error).split())


def _cmd_validate(args: argparse.Namespace) -> int:
    plan = load_plan(args.plan)
    print(f"{args.plan}: agent '{plan.name}' is valid ({len(plan.actions)} actions)")
    return 0


def _cmd_compile(args: argparse.Namespace) -> int:
    try:
        agent = import_ref(args.agent)
    except RefError as error:
        raise PlanError(str(error)) from None
    plan = compile_agent(agent)
    if args.output:
        from flink_agents.plan import save_plan

        save_plan(plan, args.output)
    else:
        print(plan.to_yaml(), end="")
    return 0


def _cmd_cluster(args: argparse.Namespace) -> int:
    from flink_agents.testing import ClusterError, StandaloneCluster

    if args.action != "up":  # the cluster as `up` wrote it to the work directory
        cluster = StandaloneCluster.from_work_dir(args.work_dir)
        if args.action == "down":
            cluster.stop()
            print(f"Flink cluster of {cluster.work_dir} stopped")
        else:
            state = "up" if cluster.is_up() else "not answering"
            pids = cluster.taskmanager_pids()
            print(f"Flink cluster {cluster.rest_url}: {state}")
            print(f"TaskManagers running: {len(pids)} {pids}")
        return 0
    if args.config is not None and not args.config.is_file():
        print(f"error: no config file {args.config}", file=sys.stderr)
        return 2
    default = Path("conf/config.yaml")
    config = args.config or (default if default.is_file() else None)
    try:
        cluster = StandaloneCluster(args.work_dir, config, rest_port=args.rest_port)
        cluster.start()
    except (ClusterError, TimeoutError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(
        f"Flink cluster up: {cluster.rest_url}, {cluster.slots} slot(s) (logs in {cluster.log_dir})"
    )
    print(f"submit with: FLINK_CONF_DIR={cluster.conf_dir} flink run -py jobs/agent_job.py ...")
    return 0


def _cmd_llm_server(args: argparse.Namespace) -> int:
    from flink_agents.testing.llm_server import serve

    try:
        return serve(
            args.host,
            args.port,
            args.script,
            args.latency,
            requests_per_minute=args.requests_per_minute,
        )
    except (OSError, ValueError) as error:  # an unreadable script, a taken port
        print(f"error: {error}", file=sys.stderr)
        return 2


_COMMANDS = {
    "demo": _cmd_demo,
    "run": _cmd_run,
    "validate": _cmd_validate,
    "compile": _cmd_compile,
    "cluster": _cmd_cluster,
    "llm-server": _cmd_llm_server,
    "knowledge": _knowledge.run,
    "forget": _forget.run,
    "history": _history.run,
    "log": _log.run,
}
