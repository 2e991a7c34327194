"""Running agents written for Apache Flink Agents (``docs/migrating.md``).

Their import paths (``flink_agents.api.agents.agent``, ``flink_agents.api.decorators``,
``flink_agents.api.resource``, ...) are thin modules over our API; what they need beyond a
name lives here: resources declared by class path (``ResourceDescriptor(clazz=...)``) and
their chat model connections and setups, the plans of their agents, and their execution
environment over ours.
"""

from flink_agents._public import name_by_package
from flink_agents.migration._environment import (
    MigratingBuilder,
    MigratingEnvironment,
    environment,
    runner_options,
)
from flink_agents.migration._plan import extend_plan, plan_of, with_shared
from flink_agents.migration._resources import (
    PROVIDERS,
    ChatModelConnection,
    ChatModelSetup,
    EmbeddingModelConnection,
    EmbeddingModelSetup,
    UnsupportedResourceError,
    check_class,
    create_resource,
    declared_resource,
    resource_type_of,
)

__all__ = [
    "PROVIDERS",
    "ChatModelConnection",
    "ChatModelSetup",
    "EmbeddingModelConnection",
    "EmbeddingModelSetup",
    "MigratingBuilder",
    "MigratingEnvironment",
    "UnsupportedResourceError",
    "check_class",
    "create_resource",
    "declared_resource",
    "environment",
    "extend_plan",
    "plan_of",
    "resource_type_of",
    "runner_options",
    "with_shared",
]

name_by_package(__name__, globals(), __all__)
