"""Fixtures for tests against a real trace viewer: Arize Phoenix on loopback, and Chromium to
take screenshots of its pages.

Where Phoenix or Chromium is missing, the tests that use them skip, saying what is missing and
how to get it; with ``FLINK_AGENTS_REQUIRE_PHOENIX=1`` (set by ``.ci/run``) they fail instead,
so CI cannot pass without running them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NoReturn

import pytest

from tests.tracing.phoenix import PHOENIX_ENV, Phoenix, chromium_executable, phoenix_executable

REQUIRE_ENV = "FLINK_AGENTS_REQUIRE_PHOENIX"


def _missing(reason: str) -> NoReturn:
    """Skip the test for ``reason``, or fail it where Phoenix's tests are required."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(reason)


# One Phoenix per test module: it takes some 15 s to start. Tests that share it send their
# spans to a project of their own (resource attribute ``openinference.project.name``).
@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    """A started Phoenix, its database and log in a temporary directory; stopped after."""
    if phoenix_executable() is None:
        _missing(f"no Phoenix: run `make .venv-phoenix/.installed` or set {PHOENIX_ENV}")
    with Phoenix(tmp_path_factory.mktemp("phoenix")) as server:
        yield server


@pytest.fixture(scope="session")
def chromium() -> str:
    """The Chromium executable, for ``tests.tracing.phoenix.screenshot``."""
    executable = chromium_executable()
    if executable is None:
        _missing("no Chromium: `apt-get install chromium` (or chromium / chromium-browser)")
    return executable
