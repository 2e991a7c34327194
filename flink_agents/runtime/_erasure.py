"""Forgetting a key (``ForgetKey``): the request as a key's input, and what an erasure removed.

A ``ForgetKey`` record's key is its own ``key`` (``keyed_input``: the stream's key selector
is for its other records). It reaches the driver tagged, as plain data, since it may wait
in the key's queue of inputs in Flink state, as ``("flink-agents/forget", 1, {request_id})``.
The driver erases the key when the request's turn comes (``KeyDriver._forget``); the
engine removes what the key left outside Flink state (``RunEngine.forget``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flink_agents.api import ForgetKey
from flink_agents.memory import StateFormatError
from flink_agents.runtime._records import take_key

if TYPE_CHECKING:
    from flink_agents.runtime._options import AgentOptions

FORGET_TAG = "flink-agents/forget"
FORGET_VERSION = 1


def forget_input(request: ForgetKey) -> tuple[str, int, dict[str, Any]]:
    """``request`` as its key's input: tagged plain data (it names no class of ours)."""
    return (FORGET_TAG, FORGET_VERSION, {"request_id": request.request_id})


def forget_request_of(record: Any) -> dict[str, Any] | None:
    """The fields of the forget request an input is (``forget_input``), or None for anything
    else."""
    if type(record) is not tuple or len(record) != 3 or record[0] != FORGET_TAG:
        return None
    if type(record[1]) is not int or record[1] > FORGET_VERSION:
        raise StateFormatError(
            f"a queued forget request in Flink state has format version {record[1]!r}; this "
            f"release of flink_agents reads up to {FORGET_VERSION}: restore it with the "
            "release that wrote it or a later one"
        )
    return record[2]


def keyed_input(key_of: Callable[[Any], Any], record: Any) -> tuple[Any, Any]:
    """``(key, input)`` for a record of an input or signal stream: a ``ForgetKey``'s own key
    and its tagged form, else the key ``key_of`` takes and the record as it is.

    Raises:
        BadRecord: the key cannot be taken (``take_key``).
    """
    if type(record) is ForgetKey:
        return take_key(_own_key, record), forget_input(record)
    return take_key(key_of, record), record


def _own_key(request: ForgetKey) -> Any:
    return request.key


def forget_stored_key(
    key: Any, options: AgentOptions | None = None, *, action_log: str | None = None
) -> dict[str, int]:
    """Erase ``key`` from what jobs run with ``options`` keep outside Flink state, with no
    job running (``flink-agents forget``): its records in the action log (``action_log``,
    else the configured one; every job in it), its long-term memory sets and the knowledge
    items its runs wrote in the store, and its lines in the event-log directory. A store
    or log that does not exist is left alone. (A running job erases a key itself, all of
    this and its Flink state, when a ``ForgetKey`` comes on its input.)

    Returns:
        How many of each went, by kind.

    Raises:
        ActionLogError: the action log cannot be opened or written.
        StoreLockedError: the embedded store is open in a running job's process.
    """
    from flink_agents._ids import key_text
    from flink_agents.runtime._event_log import log_files, purge_key_lines
    from flink_agents.runtime._long_term import forget_in_store, store_location
    from flink_agents.runtime._options import load_options
    from flink_agents.runtime.action_log import open_action_log

    options = options if options is not None else load_options()
    removed: dict[str, int] = {}
    url = action_log or options.action_log_url(embedded_default=True)
    if url is not None and url != "memory://" and _exists(url):
        with open_action_log(url) as log:
            removed["action_log_records"] = log.forget_key(key_text(key))
    removed.update(forget_in_store(store_location(options), key))
    directory = options.event_log_directory()
    if directory.is_dir():
        removed["event_log_lines"] = sum(purge_key_lines(f, key) for f in log_files(directory))
    return removed


def _exists(url: str) -> bool:
    """Whether the action log ``url`` names may hold something: a SQLite file that exists
    (opening one creates it), or a server."""
    if url.startswith("sqlite://") or "://" not in url:
        return Path(url.removeprefix("sqlite://")).is_file()
    return True
