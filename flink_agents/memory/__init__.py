"""Memory implementations: flattened sensory/short-term memory over any string-keyed map."""

from flink_agents.memory._buffer import BufferedState, MemoryDelta
from flink_agents.memory._flat import FlatMemory, ObjectMarker, StoredMemoryObject, to_dict
from flink_agents.memory._state import DictState, StateMap

__all__ = [
    "BufferedState",
    "DictState",
    "FlatMemory",
    "MemoryDelta",
    "ObjectMarker",
    "StateMap",
    "StoredMemoryObject",
    "to_dict",
]
