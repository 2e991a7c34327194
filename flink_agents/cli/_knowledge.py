"""``flink-agents knowledge``: load documents into a knowledge set, and search one.

Both find the store as runners do: ``--store`` or ``--data-dir`` if given, else the agent
options of Flink's ``config.yaml`` (``$FLINK_CONF_DIR``), else ``$FLINK_AGENTS_DATA_DIR`` or
``~/.flink-agents``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

LOAD_EPILOG = """\
Each line of FILE is a JSON object with a "text" string (what is embedded and searched) and
an "id" (a string or an integer); other fields are kept with it. Loading the same file again
adds nothing; a changed document (same id) is rewritten in place. A bad line loads nothing:
the error names the file and every bad line.

Embedded store: loads the store directory, which the local runner and Flink jobs of any
parallelism on this machine share (also while a job runs). A Qdrant server (--store
http://...) is shared by every machine.
"""


def add_parser(commands: Any) -> None:
    """Add ``knowledge load`` and ``knowledge search`` to the ``flink-agents`` command."""
    knowledge = commands.add_parser("knowledge", help="load and search knowledge sets")
    actions = knowledge.add_subparsers(dest="knowledge_command", required=True)

    load = actions.add_parser(
        "load",
        help="load documents from a JSON-lines file into a knowledge set, with embeddings",
        epilog=LOAD_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    load.add_argument("set", help="the knowledge set (created if missing)")
    load.add_argument("file", type=Path, help="JSON-lines documents, one object per line")
    _store_arguments(load)
    load.add_argument("--id-field", default="id", help='the id field (default "id")')
    load.add_argument("--text-field", default="text", help='the text field (default "text")')
    load.add_argument("--batch-size", type=int, default=64, help="documents per batch")
    load.add_argument("--quiet", action="store_true", help="no progress bar")

    search = actions.add_parser("search", help="the documents of a set closest to a query")
    search.add_argument("set")
    search.add_argument("query")
    search.add_argument("--limit", type=int, default=3, help="documents to show (default 3)")
    _store_arguments(search)


def _store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", help="the agent option data-dir (store: DIR/vector-store)")
    parser.add_argument(
        "--store", help="the agent option long-term-memory-store: a directory or http(s) URL"
    )


def run(args: argparse.Namespace) -> int:
    from flink_agents.api import FlinkAgentsError
    from flink_agents.integrations.vector_stores import StoreLockedError
    from flink_agents.runtime import load_options

    try:
        options = load_options(_overrides(args))
        if args.knowledge_command == "load":
            return _load(args, options)
        return _search(args, options)
    except StoreLockedError as error:
        print(
            f"error: {_one_line(error)}",
            file=sys.stderr,
        )
        return 2
    except OSError as error:
        where = error.filename if error.filename is not None else ""
        print(f"error: cannot read {where}: {error.strerror or error}", file=sys.stderr)
        return 2
    except FlinkAgentsError as error:  # bad documents (multi-line), options, the store
        print(f"error: {error}", file=sys.stderr)
        return 2


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides = {}
    if args.data_dir:
        overrides["data-dir"] = args.data_dir
    if args.store:
        overrides["long-term-memory-store"] = args.store
    return overrides


def _load(args: argparse.Namespace, options: Any) -> int:
    from flink_agents.runtime import load_knowledge

    if args.batch_size < 1:
        print("error: --batch-size must be >= 1", file=sys.stderr)
        return 2
    report = load_knowledge(
        args.set,
        args.file,
        options=options,
        id_field=args.id_field,
        text_field=args.text_field,
        batch_size=args.batch_size,
        progress=not args.quiet,
    )
    print(f"loaded {report.summary()}")
    return 0


def _search(args: argparse.Namespace, options: Any) -> int:
    import json

    from flink_agents.api import MemorySetNotFoundError
    from flink_agents.runtime import search_knowledge

    try:
        found = search_knowledge(args.set, args.query, args.limit, options=options)
    except MemorySetNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for item in found:
        print(f"{item.score:.3f}  {json.dumps(item.value, ensure_ascii=False)}")
    return 0


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())
