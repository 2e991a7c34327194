"""Fixtures of the MCP tests: the calendar server over streamable HTTP (a child process on
loopback), the bookings ledger, the scripted model's environment."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integrations.mcp.agents import SERVER_SCRIPT

TOKEN = "calendar-token-5309"
LLM_KEY = "sk-mcp-test-4242"


@dataclass
class HttpCalendar:
    """A calendar server over streamable HTTP that wants ``Authorization: Bearer TOKEN``."""

    url: str
    process: subprocess.Popen

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)


def bookings(ledger: Path) -> list[str]:
    """The bookings the server really made, in order."""
    return ledger.read_text().splitlines() if ledger.exists() else []


@pytest.fixture
def ledger(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "bookings.txt"
    monkeypatch.setenv("CALENDAR_LEDGER", str(path))
    return path


@pytest.fixture
def scripted(monkeypatch, llm_server):
    """The scripted model, reached through the environment as the test agents read it."""
    monkeypatch.setenv("TEST_LLM_URL", llm_server.base_url)
    monkeypatch.setenv("TEST_LLM_KEY", LLM_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", LLM_KEY)
    return llm_server


@pytest.fixture
def http_calendar(monkeypatch, ledger) -> Iterator[HttpCalendar]:
    monkeypatch.setenv("CALENDAR_TOKEN", TOKEN)
    monkeypatch.setenv("CALENDAR_AUTH", f"Bearer {TOKEN}")
    process = subprocess.Popen(
        [sys.executable, SERVER_SCRIPT, "--http"],
        stdout=subprocess.PIPE,
        text=True,
        env={"CALENDAR_TOKEN": TOKEN, "CALENDAR_LEDGER": str(ledger), "PATH": "/usr/bin:/bin"},
    )
    try:
        port = int(process.stdout.readline())
        yield HttpCalendar(f"http://127.0.0.1:{port}/mcp", process)
    finally:
        process.kill()
        process.wait(10)
