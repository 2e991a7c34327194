"""Fixtures: a real PostgreSQL server, and a fresh action log of every backend per test."""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from flink_agents.runtime.action_log import ActionLog, InMemoryActionLog

TEST_USER = "flinkagents-pg"
"""System user created to run PostgreSQL when running as root without a ``postgres`` user."""


def _postgres_bindir() -> Path | None:
    """The newest installed PostgreSQL server's bin directory."""
    found = sorted(
        (Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")),
        key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1]
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _server_user() -> str | None:
    """Who runs the server: None for the current user, else an unprivileged system user
    (initdb and postgres refuse to run as root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", TEST_USER):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            pass
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", TEST_USER],
        check=True,
    )
    return TEST_USER


def _as_user(user: str | None, command: list[str]) -> list[str]:
    if user is None:
        return command
    if shutil.which("runuser"):
        return ["runuser", "-u", user, "--", *command]
    return ["su", user, "-s", "/bin/sh", "-c", shlex.join(command)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PostgresServer:
    """A throwaway server on the loopback interface, trusting local connections."""

    port: int
    superuser: str = "postgres"
    _names: Iterator[int] = field(default_factory=itertools.count)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.superuser}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; returns its URL."""
        import psycopg

        name = f"action_log_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} STRATEGY FILE_COPY")
        return self.url(name)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server started from the machine's binaries for the test session."""
    bindir = _postgres_bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL server binaries (initdb) under /usr/lib/postgresql or PATH")
    user = _server_user()
    home = Path(tempfile.mkdtemp(prefix="fa-pg-"))
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(home, entry.pw_uid, entry.pw_gid)
    data, log = home / "data", home / "server.log"
    port = _free_port()

    def run(*command: str) -> None:
        subprocess.run(
            _as_user(user, [str(bindir / command[0]), *command[1:]]),
            check=True,
            cwd=home,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    options = (
        f"-p {port} -k {home} -c listen_addresses=127.0.0.1 -c fsync=off"
        " -c synchronous_commit=off -c full_page_writes=off"
    )
    try:
        initdb = ["-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-locale"]
        run("initdb", *initdb, "--no-sync")
        run("pg_ctl", "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60", "start")
    except subprocess.CalledProcessError as error:
        detail = error.stderr.decode(errors="replace")
        if log.exists():
            detail += log.read_text(errors="replace")
        shutil.rmtree(home, ignore_errors=True)
        raise RuntimeError(f"could not start PostgreSQL: {detail}") from error
    try:
        yield PostgresServer(port)
    finally:
        try:
            run("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(home, ignore_errors=True)


@dataclass
class Backend:
    """How to open (another connection to) one fresh store of one backend."""

    name: str
    opener: Callable[[], ActionLog]
    opened: list[ActionLog] = field(default_factory=list)

    def open(self) -> ActionLog:
        """A set-up log over the same store, as another thread or process would open it."""
        log = self.opener()
        log.setup()
        self.opened.append(log)
        return log

    def close_all(self) -> None:
        for log in self.opened:
            log.close()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """A fresh store for each test, of every backend."""
    if request.param == "memory":
        shared = InMemoryActionLog()  # one process-local store: every "open" shares it
        made = Backend("memory", lambda: shared)
    elif request.param == "sqlite":
        from flink_agents.runtime.action_log.sqlite import SqliteActionLog

        path = tmp_path / "logs" / "actions.db"
        made = Backend("sqlite", lambda: SqliteActionLog(path))
    else:
        from flink_agents.runtime.action_log.postgres import PostgresActionLog

        url = request.getfixturevalue("postgres_server").create_database()
        made = Backend("postgres", lambda: PostgresActionLog(url))
    try:
        yield made
    finally:
        made.close_all()


@pytest.fixture
def log(backend: Backend) -> ActionLog:
    """A set-up, empty action log of the parametrized backend."""
    return backend.open()
