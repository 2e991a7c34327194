"""What users need to test their own agents: a real local Flink cluster, sink readers."""

from flink_agents.testing._cluster import StandaloneCluster, free_port

__all__ = ["StandaloneCluster", "free_port"]
