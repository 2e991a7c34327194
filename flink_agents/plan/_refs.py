"""Resolving ``module:qualname`` references (implemented in ``flink_agents.api._refs``, the
lowest layer, so that resources configured in code use the same rules as plans)."""

from flink_agents.api.internal import RefError, import_ref, ref_of

__all__ = ["RefError", "import_ref", "ref_of"]
