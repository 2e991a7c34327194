"""``RunnerContext`` under Apache Flink Agents' module path: ours (``docs/migrating.md``).

It has their methods: ``send_event``, ``get_resource``, ``sensory_memory``,
``short_term_memory``, ``long_term_memory``, ``agent_metric_group``,
``action_metric_group``, ``durable_execute`` and ``durable_execute_async``, ``config``,
``action_config`` and ``get_action_config_value``.
"""

from flink_agents.api._context import RunnerContext

__all__ = ["RunnerContext"]
