"""Example agents used by the demos (``refunds``: ``flink-agents demo --approvals``), the
README and the tests."""
