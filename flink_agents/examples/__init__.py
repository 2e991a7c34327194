"""Example agents used by the demo, the README and the tests."""
