"""``flink-agents forget``: erase one key from the local action log and stores.

For what a job wrote and keeps outside Flink state, with the job stopped: a running job
erases a key itself (and its Flink state, which only it can reach) when a ``ForgetKey``
record comes on its input or signal stream (``docs/waiting.md``, "Forgetting a key").
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from flink_agents.cli._history import add_key_options, add_log_option, key_of

EPILOG = """\
Removes the key's records from the action log (every job in it), its long-term memory sets
and the knowledge items its runs wrote from the vector store, and its lines from the files
under the event-log directory. The stores are found as a job finds them: the options given
here, else Flink's config.yaml ($FLINK_CONF_DIR), else under data-dir. Stop the job first:
its embedded store is locked while it runs, and its Flink state keeps the key until a
ForgetKey record reaches it.
"""


def add_parser(commands: Any) -> None:
    """Add ``forget`` to the ``flink-agents`` command."""
    forget = commands.add_parser(
        "forget",
        help="erase a key from the local action log, vector store and event log",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_key_options(forget)
    add_log_option(forget)
    forget.add_argument("--data-dir", help="the agent option data-dir")
    forget.add_argument(
        "--store", help="the agent option long-term-memory-store: a directory or http(s) URL"
    )
    forget.add_argument("--event-log-dir", help="the agent option event-log-dir")


def run(args: argparse.Namespace) -> int:
    """Erase the key and print what went; 2 when a store cannot be opened or written."""
    from flink_agents.api import FlinkAgentsError
    from flink_agents.integrations.vector_stores import StoreLockedError
    from flink_agents.runtime import forget_stored_key, load_options

    try:
        key = key_of(args)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    overrides = {
        name: value
        for name, value in (
            ("data-dir", args.data_dir),
            ("long-term-memory-store", args.store),
            ("event-log-dir", args.event_log_dir),
        )
        if value
    }
    try:
        removed = forget_stored_key(key, load_options(overrides), action_log=args.log)
    except StoreLockedError as error:
        print(f"error: {' '.join(str(error).split())} (stop the job first)", file=sys.stderr)
        return 2
    except FlinkAgentsError as error:  # the action log, the options
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not removed:
        print("nothing to erase: no action log, store or event log was found", file=sys.stderr)
        return 0
    counts = (f"{count} {what.replace('_', ' ')}" for what, count in removed.items())
    print("erased: " + ", ".join(counts))
    return 0
