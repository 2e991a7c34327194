"""Events under Apache Flink Agents' module paths (``docs/migrating.md``)."""
