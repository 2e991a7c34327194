"""Memory implementations: flattened sensory/short-term memory over any string-keyed map,
and token budgets for putting memory into a prompt (``long_term`` holds long-term memory)."""

from flink_agents._ids import knowledge_document_id
from flink_agents._public import name_by_package
from flink_agents.memory._buffer import BufferedState, MemoryDelta
from flink_agents.memory._cache import CachedState
from flink_agents.memory._flat import FlatMemory, ObjectMarker, StoredMemoryObject, to_dict
from flink_agents.memory._identity import IdMinter
from flink_agents.memory._rebase import apply_rebased, rebase_points
from flink_agents.memory._state import DictState, StateMap
from flink_agents.memory._stored import (
    RootEntry,
    StateFormatError,
    StoredState,
    from_stored,
    root_sequence,
    stored_form,
)
from flink_agents.memory.budget import BudgetResult, TokenBudgetError, fit_to_budget

__all__ = [
    "BudgetResult",
    "BufferedState",
    "CachedState",
    "DictState",
    "FlatMemory",
    "IdMinter",
    "MemoryDelta",
    "ObjectMarker",
    "RootEntry",
    "StateFormatError",
    "StateMap",
    "StoredMemoryObject",
    "StoredState",
    "TokenBudgetError",
    "apply_rebased",
    "fit_to_budget",
    "from_stored",
    "knowledge_document_id",
    "rebase_points",
    "root_sequence",
    "stored_form",
    "to_dict",
]

name_by_package(__name__, globals(), __all__)
