"""flink_agents: event-driven AI agents as Apache Flink streaming jobs, in pure Python."""

__version__ = "0.1.0"
