"""Short-term and sensory memory under Apache Flink Agents' module path: ours.

``set`` returns a ``MemoryRef`` that ``get`` takes; ``new_object(path, overwrite=False)``
refuses to replace a plain value. ``get_fields()`` returns nested objects as
``MemoryObject`` s (seed 000), where Apache Flink Agents returns plain values
(``docs/migrating.md``).
"""

from flink_agents.api._memory import MemoryObject, MemoryType

__all__ = ["MemoryObject", "MemoryType"]
