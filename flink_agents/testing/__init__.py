"""What users need to test their own agents: a real local Flink cluster, a throwaway
PostgreSQL server, sink readers."""

from flink_agents.testing._cluster import (
    ClusterError,
    PortInUseError,
    StandaloneCluster,
    clean_environment,
    free_port,
    process_tree,
)
from flink_agents.testing._savepoints import stop_with_savepoint
from flink_agents.testing.postgres import PostgresServer, find_postgres_bindir

__all__ = [
    "ClusterError",
    "PortInUseError",
    "PostgresServer",
    "StandaloneCluster",
    "clean_environment",
    "find_postgres_bindir",
    "free_port",
    "process_tree",
    "stop_with_savepoint",
]
