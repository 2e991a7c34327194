"""The Flink runner: the dispatcher operator and the execution environment around it.

The environment and the job builder are imported on first use: a Flink operator imports
this package to run the dispatcher, and needs neither (nor PyFlink's Table API, which the
environment imports: about 50 ms more before a job's first output, ``bench/RESULTS.md``).
"""

from flink_agents._lazy import lazy_attributes
from flink_agents.runtime.flink._dispatcher import (
    DRAIN_TIMESTAMP,
    ERROR_TAG,
    MEMORY_TAG,
    AgentDispatcher,
)

__getattr__ = lazy_attributes(
    globals(),
    {
        "FlinkAgentBuilder": "flink_agents.runtime.flink._environment",
        "FlinkExecutionEnvironment": "flink_agents.runtime.flink._environment",
        "JobPaths": "flink_agents.runtime.flink._job",
        "build_agent_job": "flink_agents.runtime.flink._job",
        "read_json_files": "flink_agents.runtime.flink._job",
        "use_project_logging": "flink_agents.runtime.flink._logging",
        "write_log4j_configuration": "flink_agents.runtime.flink._logging",
    },
)

__all__ = [
    "DRAIN_TIMESTAMP",
    "ERROR_TAG",
    "MEMORY_TAG",
    "AgentDispatcher",
    "FlinkAgentBuilder",
    "FlinkExecutionEnvironment",
    "JobPaths",
    "build_agent_job",
    "read_json_files",
    "use_project_logging",
    "write_log4j_configuration",
]
