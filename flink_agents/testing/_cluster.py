"""A real Flink standalone cluster on loopback, started from the pyflink package's scripts.

For tests, ``make cluster-up`` and recovery experiments: one JobManager and any number of
TaskManagers as separate JVM processes, each of which can be killed with ``kill -9``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyflink
import yaml

from flink_agents.runtime.flink._logging import write_log4j_configuration

PYFLINK_HOME = Path(pyflink.__file__).parent


_WORKER_VARIABLES = (
    "BOOT_LOG_DIR",
    "CONTROL_API_SERVICE_DESCRIPTOR",
    "LOGGING_API_SERVICE_DESCRIPTOR",
    "PIPELINE_OPTIONS",
    "PYTHON_LOOPBACK_SERVER_ADDRESS",
    "SEMI_PERSISTENT_DIRECTORY",
    "TABLE_LOCAL_TIME_ZONE",
    "WORKER_ID",
)


def clean_environment() -> dict[str, str]:
    """This process's environment for a child process that starts Flink jobs of its own.

    After a job ran here in PyFlink's local (loopback) mode, this process carries the Python
    worker's variables (``PYFLINK_GATEWAY_DISABLED`` among them, which stops a child from
    starting a gateway, and the Flink home the worker found): they are left out.
    """
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("FLINK_", "PYFLINK_", "_PYFLINK_", "_PYTHON_"))
        and name not in _WORKER_VARIABLES
    }


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class StandaloneCluster:
    """A standalone Flink cluster whose configuration and logs live in ``work_dir``.

    Args:
        work_dir: holds ``conf/``, ``log/``, the daemons' pid files and their temporary
            files (``tmp/``).
        config_file: a ``config.yaml`` over pyflink's defaults (e.g. ``conf/config.yaml``).
        rest_port / rpc_port: 0 picks free ports (tests); the defaults are Flink's own.
        slots: task slots per TaskManager.
        overrides: more configuration, as flat ``a.b.c`` keys.
        env: more environment variables for the daemons (and so the Python workers) and for
            ``flink run`` (e.g. the keys the agents' resources read).

    Logging is the project's ``conf/log4j.properties`` (every log4j file of ``conf/``), which
    keeps the Python workers' environment out of the logs.
    """

    def __init__(
        self,
        work_dir: Path,
        config_file: Path | None = None,
        rest_port: int = 8081,
        rpc_port: int = 6123,
        slots: int = 2,
        overrides: dict[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.work_dir = Path(work_dir).resolve()
        self.conf_dir = self.work_dir / "conf"
        self.log_dir = self.work_dir / "log"
        self.pid_dir = self.work_dir / "pids"
        self.rest_port = rest_port or free_port()
        self.rpc_port = rpc_port or free_port()
        self.config_file = config_file
        self.slots = slots
        self.overrides = overrides or {}
        self.env = dict(env or {})
        self._started = 0  # TaskManagers started so far

    # -- configuration ---------------------------------------------------------------------

    @property
    def rest_url(self) -> str:
        return f"http://localhost:{self.rest_port}"

    @property
    def tmp_dir(self) -> Path:
        return self.work_dir / "tmp"

    @property
    def lib_dir(self) -> Path:
        return self.work_dir / "lib"

    def write_lib(self) -> Path:
        """Write ``lib/``: pyflink's jars plus its ``flink-python`` jar, as links.

        PyFlink's thread mode loads its native library (pemja) from the classloader that
        loads pemja's classes. ``flink run -py`` ships ``flink-python`` with every job, so
        each job's own classloader would load the library again, which Java 17 refuses
        ("already loaded in another classloader"): the second job on a TaskManager fails.
        With the jar in ``lib/`` and ``pemja.`` loaded parent-first (``conf/config.yaml``),
        the TaskManager loads it once for all jobs.
        """
        self.lib_dir.mkdir(parents=True, exist_ok=True)
        jars = [
            *(PYFLINK_HOME / "lib").glob("*.jar"),
            *(PYFLINK_HOME / "opt").glob("flink-python*.jar"),
        ]
        for jar in jars:
            link = self.lib_dir / jar.name
            if not link.exists():
                link.symlink_to(jar)
        return self.lib_dir

    def write_config(self) -> Path:
        """Write ``conf/``: the base file plus ports, slots and this Python interpreter."""
        for directory in (self.conf_dir, self.log_dir, self.pid_dir, self.tmp_dir):
            directory.mkdir(parents=True, exist_ok=True)
        self.write_lib()
        write_log4j_configuration(self.conf_dir)
        # pyflink's defaults first: they carry the JVM module flags Flink needs on Java 17.
        flat = _flatten(yaml.safe_load((PYFLINK_HOME / "conf" / "config.yaml").read_text()) or {})
        if self.config_file is not None:
            flat.update(_flatten(yaml.safe_load(Path(self.config_file).read_text()) or {}))
        flat.update(
            {
                "rest.port": self.rest_port,
                "rest.address": "localhost",
                "rest.bind-address": "localhost",
                "jobmanager.rpc.address": "localhost",
                "jobmanager.rpc.port": self.rpc_port,
                "jobmanager.bind-host": "localhost",
                "taskmanager.bind-host": "localhost",
                "taskmanager.host": "localhost",
                "taskmanager.numberOfTaskSlots": self.slots,
                "python.executable": sys.executable,
                "python.client.executable": sys.executable,
            }
        )
        # The daemons' blobs, jars and working directories, unless the file says where: a
        # TaskManager killed with ``kill -9`` never removes its own, so they stay with the
        # cluster's files instead of piling up in /tmp.
        flat.setdefault("io.tmp.dirs", str(self.tmp_dir))
        flat.update(self.overrides)
        target = self.conf_dir / "config.yaml"
        target.write_text(yaml.safe_dump(flat, sort_keys=True))
        return target

    def environment(self) -> dict[str, str]:
        """The environment for the cluster's scripts and for ``flink run``."""
        env = clean_environment()
        env.update(self.env)
        env.update(
            FLINK_CONF_DIR=str(self.conf_dir),
            FLINK_LOG_DIR=str(self.log_dir),
            FLINK_PID_DIR=str(self.pid_dir),
            FLINK_LIB_DIR=str(self.lib_dir),
            PYFLINK_PYTHON=sys.executable,
        )
        return env

    # -- processes -------------------------------------------------------------------------

    def start(self, taskmanagers: int = 1, timeout: float = 90) -> StandaloneCluster:
        """Start a JobManager and ``taskmanagers`` TaskManagers; wait until they registered."""
        self.write_config()
        self._script("jobmanager.sh", "start")
        for _ in range(taskmanagers):
            self.start_taskmanager()
        self.wait_for_taskmanagers(taskmanagers, timeout)
        return self

    def start_taskmanager(self) -> str:
        """Start one more TaskManager; returns its resource id (``tm-1``, ``tm-2``, ...: never
        reused, so the REST API's ids name one process each, see ``taskmanager_pid``)."""
        self._started += 1
        resource_id = f"tm-{self._started}"
        self._script("taskmanager.sh", "start", "-D", f"taskmanager.resource-id={resource_id}")
        return resource_id

    def stop(self, timeout: float = 20) -> None:
        """Stop every TaskManager and the JobManager as ``stop-all`` does (SIGTERM, then
        SIGKILL after ``timeout``), but all at once and without the scripts' JVM start-up;
        Python workers left behind are killed too."""
        daemons = self._pids("taskexecutor") + self._pids("standalonesession")
        trees = [process_tree(pid) for pid in daemons if _alive(pid)]
        for tree in trees:
            _kill(tree[0], signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while any(_alive(tree[0]) for tree in trees) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in (pid for tree in trees for pid in tree):
            if _alive(pid):
                _kill(pid, signal.SIGKILL)
        for pid_file in self.pid_dir.glob("flink-*.pid"):
            pid_file.unlink()

    def taskmanager_pids(self) -> list[int]:
        return [pid for pid in self._pids("taskexecutor") if _alive(pid)]

    def taskmanager_pid(self, resource_id: str) -> int | None:
        """The living TaskManager process started with ``resource_id``, if any."""
        argument = f"taskmanager.resource-id={resource_id}".encode()
        for pid in self.taskmanager_pids():
            with contextlib.suppress(OSError):
                if argument in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                    return pid
        return None

    def job_taskmanagers(self, job_id: str) -> set[str]:
        """The resource ids of the TaskManagers running the job's tasks now."""
        found = set()
        for vertex in self.rest(f"/jobs/{job_id}")["vertices"]:
            hosts = self.rest(f"/jobs/{job_id}/vertices/{vertex['id']}/taskmanagers")
            found.update(tm["taskmanager-id"] for tm in hosts["taskmanagers"])
        return found

    def kill_taskmanager(self, pid: int | None = None, tree: bool = False) -> int:
        """``kill -9`` TaskManager ``pid`` (default: the oldest living one); returns its pid.
        ``tree`` kills its Python workers too, as losing the machine or container would."""
        pid = pid or self.taskmanager_pids()[0]
        for victim in process_tree(pid) if tree else [pid]:
            _kill(victim, signal.SIGKILL)
        return pid

    def worker_pids(self) -> list[int]:
        """The processes the living TaskManagers started (their Python workers)."""
        return [p for tm in self.taskmanager_pids() for p in process_tree(tm)[1:]]

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- jobs ------------------------------------------------------------------------------

    def submit(
        self, job: Path, *args: str, detached: bool = False, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        """``flink run -py job args`` against this cluster (blocks until the job ends unless
        ``detached``)."""
        command = [
            "bash",
            str(PYFLINK_HOME / "bin" / "flink"),
            "run",
            "-m",
            f"localhost:{self.rest_port}",
            *(["-d"] if detached else []),
            "-py",
            str(job),
            "-pyexec",
            sys.executable,
            "-pyclientexec",
            sys.executable,
            *args,
        ]
        return subprocess.run(
            command, env=self.environment(), capture_output=True, text=True, timeout=timeout
        )

    def rest(self, path: str) -> Any:
        with urllib.request.urlopen(self.rest_url + path, timeout=5) as response:
            return json.loads(response.read())

    def wait_for_taskmanagers(self, count: int, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if len(self.rest("/taskmanagers")["taskmanagers"]) >= count:
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError, KeyError):
                pass
            time.sleep(0.5)
        raise TimeoutError(
            f"{count} TaskManager(s) did not register within {timeout} s; logs: {self.log_dir}"
        )

    # -- internals -------------------------------------------------------------------------

    def _script(self, name: str, *args: str, check: bool = True) -> None:
        subprocess.run(
            ["bash", str(PYFLINK_HOME / "bin" / name), *args],
            env=self.environment(),
            check=check,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def _pids(self, kind: str) -> list[int]:
        pids = []
        for pid_file in self.pid_dir.glob(f"flink-*-{kind}.pid"):
            pids.extend(int(line) for line in pid_file.read_text().split() if line.isdigit())
        return pids


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it, parents first (from ``/proc``; Linux only)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        parent = int(stat.rsplit(")", 1)[1].split()[1])  # the name may hold spaces
        children.setdefault(parent, []).append(int(entry.name))
    tree, index = [pid], 0
    while index < len(tree):
        tree.extend(sorted(children.get(tree[index], [])))
        index += 1
    return tree


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs; a killed process nobody reaped yet (a zombie) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
