"""The main job: run an agent plan over JSON-lines files, writing JSON-lines files.

Submit it to a cluster (see the README):

    flink run -m localhost:8081 -py jobs/agent_job.py -pyexec .venv/bin/python \\
        --plan plans/support_triage.yaml --input data/support_tickets.jsonl \\
        --output out/job --key user

Outputs go to ``OUTPUT/outputs``, rejected lines and failed runs to ``OUTPUT/errors`` (and,
with ``--memory-snapshots``, each key's short-term memory after every run to
``OUTPUT/memory``). Agent options come from the cluster's ``config.yaml`` under ``agent:``
and from ``--option name=value``. ``--signals FILE --signal-type module:Class`` reads
signals for the agent's keys too (``docs/waiting.md``): each line the fields of one event,
keyed by ``--signal-key`` (default: ``--key``). ``--forget FILE`` reads erasure requests,
each line ``{"key": K, "request_id": ...}``: each key's state, log records, long-term memory
and event-log lines are erased (``ForgetKey``, ``docs/waiting.md``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents.api.internal import import_ref
from flink_agents.plan import load_plan
from flink_agents.runtime.flink import JobPaths, build_agent_job, use_project_logging


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", type=Path, required=True)
    parser.add_argument("--input", type=Path, required=True, help="a JSON-lines file or folder")
    parser.add_argument("--output", type=Path, required=True, help="output folder")
    parser.add_argument("--key", required=True, help="the record field that keys the runs")
    parser.add_argument("--parallelism", type=int, default=None)
    parser.add_argument("--checkpoint-interval-ms", type=int, default=2000)
    parser.add_argument("--memory-snapshots", action="store_true")
    parser.add_argument("--signals", type=Path, default=None, help="a JSON-lines file or folder")
    parser.add_argument("--signal-key", default=None, help="the field that keys the signals")
    parser.add_argument("--signal-type", default=None, help="the signals' Event: module:Class")
    parser.add_argument(
        "--forget", type=Path, default=None, help='erasure requests: {"key", "request_id"} lines'
    )
    parser.add_argument(
        "--option", action="append", default=[], metavar="NAME=VALUE", help="an agent option"
    )
    args = parser.parse_args(argv)
    if (args.signals is None) != (args.signal_type is None):
        parser.error("--signals and --signal-type go together")
    options = {}
    for item in args.option:
        name, _, value = item.partition("=")
        options[name] = yaml.safe_load(value)
    if args.memory_snapshots:
        options["memory_snapshots"] = True
    plan = load_plan(args.plan)
    # Run locally, PyFlink starts a JVM here: it logs no environment (API keys). Under
    # `flink run` the JVM runs already, with the cluster's configuration.
    use_project_logging()
    env = StreamExecutionEnvironment.get_execution_environment()
    if args.parallelism:
        env.set_parallelism(args.parallelism)
    output = args.output.resolve()
    paths = JobPaths(
        input=args.input.resolve(),
        output=output / "outputs",
        errors=output / "errors",
        memory=output / "memory" if args.memory_snapshots else None,
        signals=args.signals.resolve() if args.signals else None,
        forget=args.forget.resolve() if args.forget else None,
    )
    build_agent_job(
        env,
        plan,
        paths,
        args.key,
        args.checkpoint_interval_ms,
        signal_key=args.signal_key,
        signal_type=import_ref(args.signal_type) if args.signal_type else None,
        **options,
    )
    env.execute(f"flink-agents: {plan.name}")


if __name__ == "__main__":
    main()
