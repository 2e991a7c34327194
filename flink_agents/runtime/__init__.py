"""The runtime: the run engine shared by all runners, the local runner, and loading knowledge
where runners read it (``load_knowledge``).

The local runner and knowledge loading are imported on first use: a Flink operator imports
this package for the engine, and needs neither (nor long-term memory's modules, which
knowledge loading imports: start-up, ``bench/RESULTS.md``).
"""

from flink_agents._lazy import lazy_attributes
from flink_agents.runtime._engine import PendingAction, RunEngine, RunState, StepResult
from flink_agents.runtime._options import AgentOptions, load_options, their_option
from flink_agents.runtime.journal import ActionJournal

__getattr__ = lazy_attributes(
    globals(),
    {
        "DocumentFileError": "flink_agents.runtime._knowledge_load",
        "KnowledgeLoadReport": "flink_agents.runtime._knowledge_load",
        "knowledge_stores": "flink_agents.runtime._knowledge_load",
        "load_knowledge": "flink_agents.runtime._knowledge_load",
        "search_knowledge": "flink_agents.runtime._knowledge_load",
        "LocalAgentBuilder": "flink_agents.runtime._local",
        "LocalExecutionEnvironment": "flink_agents.runtime._local",
        "LocalRunner": "flink_agents.runtime._local",
        "local_journal": "flink_agents.runtime._local",
        "forget_stored_key": "flink_agents.runtime._erasure",
    },
)

__all__ = [
    "ActionJournal",
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
    "forget_stored_key",
    "knowledge_stores",
    "load_knowledge",
    "load_options",
    "local_journal",
    "search_knowledge",
    "their_option",
]
