"""The runtime: the run engine shared by all runners, the local runner, and loading knowledge
where runners read it (``load_knowledge``)."""

from flink_agents.runtime._engine import PendingAction, RunEngine, RunState, StepResult
from flink_agents.runtime._knowledge_load import (
    DocumentFileError,
    KnowledgeLoadReport,
    knowledge_stores,
    load_knowledge,
    search_knowledge,
)
from flink_agents.runtime._local import (
    LocalAgentBuilder,
    LocalExecutionEnvironment,
    LocalRunner,
    local_journal,
)
from flink_agents.runtime._options import AgentOptions, load_options

__all__ = [
    "AgentOptions",
    "DocumentFileError",
    "KnowledgeLoadReport",
    "LocalAgentBuilder",
    "LocalExecutionEnvironment",
    "LocalRunner",
    "PendingAction",
    "RunEngine",
    "RunState",
    "StepResult",
    "knowledge_stores",
    "load_knowledge",
    "load_options",
    "local_journal",
    "search_knowledge",
]
