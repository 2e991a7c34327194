"""A throwaway PostgreSQL server on loopback, started from the machine's own binaries.

The shared action log backend must be tested against a real server, and a cluster's
recovery must be proved with the log every TaskManager shares; no Docker engine runs here,
so tests ``initdb`` a temporary directory and ``pg_ctl start`` it on a free port. initdb and
postgres refuse to run as root: as root, the server runs as ``postgres`` or a system user
created for it.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from flink_agents.testing._cluster import free_port

TEST_USER = "flinkagents-pg"
"""System user created to run PostgreSQL when running as root without a ``postgres`` user."""


def find_postgres_bindir() -> Path | None:
    """The newest installed PostgreSQL server's bin directory (the one holding ``initdb``),
    or None when there is none."""
    found = sorted(
        (Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")),
        key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1]
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def server_user() -> str | None:
    """Who runs the server: None for the current user, else an unprivileged system user."""
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


class PostgresServer:
    """A server in a temporary directory, trusting local connections, durability off (it
    lives for one test session; speed matters more than surviving a power cut).

    Args:
        bindir: the server binaries; None finds them (``find_postgres_bindir``).
        port: 0 picks a free loopback port.
    """

    superuser = "postgres"

    def __init__(self, bindir: Path | None = None, port: int = 0) -> None:
        self.bindir = bindir or find_postgres_bindir()
        self.port = port or free_port()
        self.home: Path | None = None
        self._user: str | None = None
        self._names = itertools.count()

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.superuser}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; returns its URL."""
        import psycopg

        name = f"action_log_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} STRATEGY FILE_COPY")
        return self.url(name)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> PostgresServer:
        """initdb a temporary directory and start the server; raises RuntimeError with the
        server's log when it does not come up."""
        if self.bindir is None:
            raise RuntimeError("no PostgreSQL server binaries (initdb) found")
        self._user = server_user()
        self.home = Path(tempfile.mkdtemp(prefix="fa-pg-"))
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            os.chown(self.home, entry.pw_uid, entry.pw_gid)
        data, log = self.home / "data", self.home / "server.log"
        options = (
            f"-p {self.port} -k {self.home} -c listen_addresses=127.0.0.1 -c fsync=off"
            " -c synchronous_commit=off -c full_page_writes=off"
        )
        try:
            initdb = ["-D", str(data), "-A", "trust", "-U", self.superuser, "-E", "UTF8"]
            self._run("initdb", *initdb, "--no-locale", "--no-sync")
            self._run(
                "pg_ctl", "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60", "start"
            )
        except subprocess.CalledProcessError as error:
            detail = error.stderr.decode(errors="replace")
            if log.exists():
                detail += log.read_text(errors="replace")
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None
            raise RuntimeError(f"could not start PostgreSQL: {detail}") from error
        return self

    def stop(self) -> None:
        """Stop the server at once (no checkpoint: its data is thrown away) and remove it."""
        if self.home is None:
            return
        try:
            self._run("pg_ctl", "-D", str(self.home / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self, *command: str) -> None:
        assert self.bindir is not None and self.home is not None
        subprocess.run(
            _as_user(self._user, [str(self.bindir / command[0]), *command[1:]]),
            check=True,
            cwd=self.home,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
