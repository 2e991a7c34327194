"""Embedding models under Apache Flink Agents' module paths (``docs/migrating.md``)."""
