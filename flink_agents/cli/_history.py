"""``flink-agents history``: what the action log holds of one key's runs.

The log is found as a Flink job finds it: ``--log`` if given, else the ``action-log`` of
Flink's ``config.yaml`` (``$FLINK_CONF_DIR``), else the SQLite file under ``data-dir``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.text import Text
from rich.tree import Tree

from flink_agents.api import FlinkAgentsError
from flink_agents.runtime.action_log import (
    ActionLog,
    ActionLogError,
    key_history,
    open_action_log,
    redact_secrets,
)

EPILOG = """\
Only actions that made a durable call or wrote outside Flink state (long-term memory,
knowledge, external ids) are recorded, unless the job ran with action-log-record: all (every
completed action, an audit); other actions leave no record. Records older than the job's
action-log-retention-ms are pruned. Memory changes are the net change of each action,
with the value each replaced ("was"), when the record kept it.
"""

VALUE_WIDTH = 160
"""Characters of a value shown in the terminal (--json shows it whole)."""
PIPED_WIDTH = 240
"""Columns of the tree when standard output is not a terminal."""


def add_parser(commands: Any) -> None:
    """Add ``history`` to the ``flink-agents`` command."""
    history = commands.add_parser(
        "history",
        help="show a key's runs from the action log: actions, memory changes, events, calls",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    history.add_argument("--job", required=True, help="the job's name in the log")
    add_key_options(history)
    add_log_option(history)
    history.add_argument("--json", action="store_true", help="print JSON instead of a tree")


def add_key_options(parser: Any) -> None:
    """``--key K`` or ``--key-json JSON``: the key a command is about (``key_of`` reads it)."""
    key = parser.add_mutually_exclusive_group(required=True)
    key.add_argument("--key", help="the key, a string as the key selector returned it")
    key.add_argument(
        "--key-json", metavar="JSON", help="a key that is not a string, as JSON (e.g. 42)"
    )


def key_of(args: Any) -> Any:
    """The key ``add_key_options`` took.

    Raises:
        ValueError: ``--key-json`` is not JSON.
    """
    if args.key_json is None:
        return args.key
    try:
        return json.loads(args.key_json)
    except json.JSONDecodeError as error:
        raise ValueError(f"--key-json is not JSON: {error}") from None


def add_log_option(parser: Any) -> None:
    """``--log URL``: the action log a command reads (``_open`` takes it)."""
    parser.add_argument(
        "--log",
        metavar="URL",
        help="the action log (sqlite:///path.db, a file path or postgresql://...); default: "
        "the job's default, from config.yaml or <data-dir>/action-log.db",
    )


def run(args: Any) -> int:
    """Print the history; 1 when the log holds nothing of the key, 2 when it cannot be read."""
    try:
        key = key_of(args)
    except ValueError as error:
        return _fail(str(error))
    try:
        log = _open(args.log)
    except (FlinkAgentsError, ValueError) as error:  # ActionLogError, a bad URL, bad options
        return _fail(str(error))
    try:
        with log:
            history = key_history(log, args.job, key)
            if not history.runs:
                _say_what_the_log_holds(log, args.job, history.key)
    except ActionLogError as error:
        return _fail(str(error))
    except ImportError as error:  # a record's event or value class, when unpickled
        return _fail(
            f"action log {log.name}: cannot decode the records: {error}; run this where the "
            "job's code can be imported (its PYTHONPATH)"
        )
    except Exception as error:  # the driver's, e.g. a dropped connection: passwords redacted
        cause = log.redact(f"{type(error).__name__}: {error}")
        return _fail(f"action log {log.name}: reading failed: {cause}")
    try:
        if args.json:
            json.dump(history.to_json(), sys.stdout, indent=2, ensure_ascii=False)
            print()
        elif history.runs:  # else standard error said why
            print_history(history.to_json(), sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:  # piped into head or less, which stopped reading: not an error
        # Python would report the pipe again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0 if history.runs else 1


def print_history(history: dict[str, Any], out: TextIO) -> None:
    """A history, as ``KeyHistory.to_json`` gives it, as one tree per run."""
    # Piped output is not wrapped at 80 columns, so that each line stays one line for grep.
    width = None if out.isatty() else PIPED_WIDTH
    console = Console(file=out, width=width, highlight=False, soft_wrap=False)
    console.print(
        Text.assemble(("key ", "bold"), history["key"], ("  job ", "bold"), history["job"]),
        Text.assemble(("  log ", "bold"), history["log"]),
    )
    for run in history["runs"]:
        tree = Tree(Text(f"run {run['run_sequence']}", style="bold"))
        for action in run["actions"]:
            _add_action(tree, action)
        console.print(tree)
    console.print(Text(history["note"], style="dim"))


def _add_action(tree: Tree, action: dict[str, Any]) -> None:
    status = action["status"] + (" (its calls only)" if action["status"] != "completed" else "")
    node = tree.add(
        Text.assemble(
            (f"step {action['step']} ", "bold"),
            (action["action"], "bold cyan"),
            f"  {status}  {action['recorded_at']}",
        )
    )
    for tier, title in (("short_term", "short-term memory"), ("sensory", "sensory memory")):
        if action["memory"][tier]:
            branch = node.add(title)
            for change in action["memory"][tier]:
                branch.add(_change_text(change))
    if action["events"]:
        branch = node.add("events sent")
        for event in action["events"]:
            branch.add(Text(f"{event['type']} {_short(event['fields'])}"))
    if action["calls"]:
        branch = node.add("durable calls")
        for call in action["calls"]:
            branch.add(_call_text(call))
    if action["status"] == "completed" and not (
        action["memory"]["short_term"]
        or action["memory"]["sensory"]
        or action["events"]
        or action["calls"]
    ):  # recorded with action-log-record: all; say it did nothing, not leave it bare
        node.add(Text("no memory changes, events or calls", style="dim"))


def _change_text(change: dict[str, Any]) -> Text:
    path = change["path"] or "(root)"
    was: Any = ""
    if "old" in change:  # None: the path did not exist before (or held None)
        old = change["old"]
        was = ("  (new)" if old is None else f"  (was {_short(old)})", "dim")
    if change["op"] == "clear":
        return Text("clear", style="yellow")
    if change["op"] == "delete":
        return Text.assemble(("delete ", "red"), path, was)
    if change["op"] == "object":
        fields = f" {{{', '.join(change['fields'])}}}"
        return Text.assemble(("object ", "green"), path, fields, was)
    return Text.assemble(("set ", "green"), path, f" = {_short(change['value'])}", was)


def _call_text(call: dict[str, Any]) -> Text:
    latency = call["latency_ms"]
    took = "latency not recorded" if latency is None else f"{latency:.1f} ms"
    if call["error"] is not None:
        outcome = Text(f"raised {_clip(call['error'])}", style="red")
    else:
        outcome = Text(f"-> {_short(call['result'])}")
    return Text.assemble(f"#{call['index']} {call['function']} ", outcome, (f"  ({took})", "dim"))


def _short(value: Any) -> str:
    return _clip(json.dumps(value, ensure_ascii=False))


def _clip(text: str) -> str:
    return text if len(text) <= VALUE_WIDTH else text[: VALUE_WIDTH - 3] + "..."


def _open(url: str | None) -> ActionLog:
    """The log ``url`` names, or the job's default one. A SQLite file must exist: opening
    one creates it, and an empty new file would only hide a wrong path."""
    if url is None:
        from flink_agents.runtime import load_options  # the whole runtime: only when needed

        options = load_options()
        url = options.action_log_url(embedded_default=True)
        if url is None:
            raise ValueError("the configured action-log is none: no log to read (pass --log)")
    if url == "memory://":
        raise ValueError("an in-memory action log lives only in its job's process (pass --log)")
    if url.startswith("sqlite://") or "://" not in url:
        path = Path(url.removeprefix("sqlite://"))
        if not path.is_file():
            raise ValueError(f"no action log at {path} (pass --log, or check data-dir)")
    return open_action_log(url)


def _say_what_the_log_holds(log: ActionLog, job: str, key: str) -> None:
    """Why the history is empty, on standard error: which jobs or keys the log does hold."""
    keys = log.run_index(job)
    if keys:
        some = ", ".join(sorted(keys)[:10]) + (", ..." if len(keys) > 10 else "")
        print(
            f"no records of key {key} in job {job!r} in {log.name}; the job has records of "
            f"{len(keys)} key(s): {some}",
            file=sys.stderr,
        )
    else:
        jobs = log.jobs()
        known = ", ".join(repr(name) for name in jobs[:20]) + (", ..." if len(jobs) > 20 else "")
        print(
            f"no records of job {job!r} in {log.name}; "
            + (f"jobs in the log: {known}" if jobs else "the log is empty"),
            file=sys.stderr,
        )
    print(
        "note: only actions that made a durable call or wrote outside Flink state are "
        "recorded (unless the job ran with action-log-record: all), and only within the "
        "retention window",
        file=sys.stderr,
    )


def _fail(message: str) -> int:
    """Print ``message`` on one line, with any password in it masked; return 2."""
    print(f"error: {redact_secrets(' '.join(message.split()))}", file=sys.stderr)
    return 2
