"""The runtime's names for flink_agents' own packages, not for users.

The command line reads and writes records the way every runner does (``_records``: JSON lines,
keys, error records, signals) and takes keys the same way (``_keys``); the benchmarks make a
run's input event as the runtime does (``input_event``) and measure what a key keeps in Flink state
(``KeyControl``, ``encode_control``, and a sleeping or waiting run's ``RunState``,
``PendingAction``, ``Waited`` and ``WaitingRun``). Other packages import these from here,
never from a private module of ``flink_agents.runtime`` (``tests/test_imports.py``). Nothing
here is promised to users: names come and go with the packages that use them.
"""

from flink_agents.runtime._driver import KeyControl
from flink_agents.runtime._keys import key_function
from flink_agents.runtime._persisted import encode_control
from flink_agents.runtime._records import (
    BadRecord,
    parse_json_object,
    rejected,
    signal_event,
    take_key,
    to_json_line,
)
from flink_agents.runtime._run_state import PendingAction, RunState, Waited
from flink_agents.runtime._scheduling import WaitingRun, signal_input
from flink_agents.runtime._unvalidated import input_event

__all__ = [
    "BadRecord",
    "KeyControl",
    "PendingAction",
    "RunState",
    "Waited",
    "WaitingRun",
    "encode_control",
    "input_event",
    "key_function",
    "parse_json_object",
    "rejected",
    "signal_event",
    "signal_input",
    "take_key",
    "to_json_line",
]
