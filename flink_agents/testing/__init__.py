"""What users need to test their own agents: a real local Flink cluster, sink readers."""

from flink_agents.testing._cluster import StandaloneCluster, clean_environment, free_port

__all__ = ["StandaloneCluster", "clean_environment", "free_port"]
