"""Pytest fixtures for the scripted LLM stand-in: a fresh server per test, always stopped.

Enable with ``pytest_plugins = ["flink_agents.testing.pytest_plugin"]`` in a top-level
``conftest.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from flink_agents.testing.llm_server import Rule, ScriptedLLMServer

LLMServerFactory = Callable[..., ScriptedLLMServer]


@pytest.fixture
def llm_server_factory() -> Iterator[LLMServerFactory]:
    """Start servers with any rules and settings: ``llm_server_factory([Rule(...)], ...)``.

    Every server it starts is stopped when the test ends, even if the test fails.
    """
    started: list[ScriptedLLMServer] = []

    def factory(rules: Sequence[Rule] = (), **kwargs: Any) -> ScriptedLLMServer:
        server = ScriptedLLMServer(rules, **kwargs).start()
        started.append(server)
        return server

    yield factory
    for server in started:
        server.stop()


@pytest.fixture
def llm_server(llm_server_factory: LLMServerFactory) -> ScriptedLLMServer:
    """A running stand-in with no rules yet (it answers its default reply): add them per test."""
    return llm_server_factory()
