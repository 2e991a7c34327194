"""A real Flink standalone cluster on loopback, started from the pyflink package's scripts.

For tests, ``make cluster-up`` and recovery experiments: one JobManager and any number of
TaskManagers as separate JVM processes, each of which can be killed with ``kill -9``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
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

from flink_agents.runtime.flink import write_log4j_configuration

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


class ClusterError(RuntimeError):
    """The cluster cannot start as configured, or did not come up as ours."""


class PortInUseError(ClusterError):
    """A port the cluster must listen on is taken by another process."""


# What ``StandaloneCluster`` fills in where the config file leaves a key unset (over
# pyflink's own defaults): everything on loopback, Flink's usual ports, two slots.
DEFAULTS: dict[str, Any] = {
    "rest.port": 8081,
    "rest.address": "localhost",
    "rest.bind-address": "localhost",
    "jobmanager.rpc.address": "localhost",
    "jobmanager.rpc.port": 6123,
    "jobmanager.bind-host": "localhost",
    "taskmanager.bind-host": "localhost",
    "taskmanager.host": "localhost",
    "taskmanager.numberOfTaskSlots": 2,
}

# Written into the cluster's configuration, which the JobManager serves at
# ``/jobmanager/config``: how a cluster tells its own JobManager from another server that
# answers on the same port.
CLUSTER_ID_KEY = "flink-agents.cluster-id"


class StandaloneCluster:
    """A standalone Flink cluster whose configuration and logs live in ``work_dir``.

    Its configuration, weakest first: pyflink's ``conf/config.yaml`` (the JVM flags Flink
    needs on Java 17), ``DEFAULTS``, ``config_file``, the ``rest_port`` / ``rpc_port`` /
    ``slots`` arguments, ``overrides``. A key set in ``config_file``, nested
    (``rest: {port: 8082}``) or flat (``rest.port: 8082``), wins over the defaults; a port of
    0, in the file or as an argument, picks a free one.

    Args:
        work_dir: holds ``conf/``, ``log/``, the daemons' pid files and their temporary
            files (``tmp/``).
        config_file: a Flink ``config.yaml`` (e.g. ``conf/config.yaml``).
        rest_port / rpc_port / slots: ``rest.port``, ``jobmanager.rpc.port`` and
            ``taskmanager.numberOfTaskSlots`` over the file's (``None``: the file's, else
            the default).
        overrides: more configuration, as flat ``a.b.c`` keys, over everything.
        env: more environment variables for the daemons (and so the Python workers) and for
            ``flink run`` (e.g. the keys the agents' resources read).

    Raises:
        ClusterError: the configuration is unreadable, names no single port for a server
            (``rest.bind-port: 8081-8090``) or one port for both, or no number of slots.

    Logging is the project's ``conf/log4j.properties`` (every log4j file of ``conf/``), which
    keeps the Python workers' environment out of the logs.
    """

    def __init__(
        self,
        work_dir: Path,
        config_file: Path | None = None,
        rest_port: int | None = None,
        rpc_port: int | None = None,
        slots: int | None = None,
        overrides: dict[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.work_dir = Path(work_dir).resolve()
        self.conf_dir = self.work_dir / "conf"
        self.log_dir = self.work_dir / "log"
        self.pid_dir = self.work_dir / "pids"
        self.config_file = config_file
        self.env = dict(env or {})
        self.config = _resolve_config(
            config_file,
            {
                "rest.port": rest_port,
                "jobmanager.rpc.port": rpc_port,
                "taskmanager.numberOfTaskSlots": slots,
            },
            overrides or {},
        )
        self.config.setdefault("io.tmp.dirs", str(self.tmp_dir))
        # A new one even if the file has one (a copy of another cluster's written conf/).
        self.config[CLUSTER_ID_KEY] = f"{self.work_dir}#{secrets.token_hex(8)}"
        self._started = 0  # TaskManagers started so far

    @classmethod
    def from_work_dir(
        cls, work_dir: Path, env: Mapping[str, str] | None = None
    ) -> StandaloneCluster:
        """The cluster that ``start`` ran from ``work_dir``, as its written ``conf/`` says
        (ports, slots, id): to stop it, or ask after it, from another process."""
        written = Path(work_dir) / "conf" / "config.yaml"
        if not written.is_file():
            return cls(work_dir, env=env)
        cluster = cls(work_dir, written, env=env)
        cluster.config[CLUSTER_ID_KEY] = _read_config(written).get(CLUSTER_ID_KEY, "")
        return cluster

    # -- configuration ---------------------------------------------------------------------

    @property
    def rest_port(self) -> int:
        """The port the REST API listens on (``rest.bind-port`` if set, else ``rest.port``)."""
        return int(self.config.get("rest.bind-port", self.config["rest.port"]))

    @property
    def rpc_port(self) -> int:
        return int(self.config["jobmanager.rpc.port"])

    @property
    def slots(self) -> int:
        """Task slots per TaskManager."""
        return int(self.config["taskmanager.numberOfTaskSlots"])

    @property
    def rest_host(self) -> str:
        """Where clients reach the REST API (``rest.address``; loopback for a wildcard)."""
        host = str(self.config["rest.address"])
        return "localhost" if host in ("0.0.0.0", "::", "") else host

    @property
    def rest_url(self) -> str:
        host = f"[{self.rest_host}]" if ":" in self.rest_host else self.rest_host
        return f"http://{host}:{self.rest_port}"

    @property
    def cluster_id(self) -> str:
        return str(self.config[CLUSTER_ID_KEY])

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
        """Write ``conf/``: ``config.yaml`` (``self.config``, flat keys), the log4j files and
        ``lib/``."""
        for directory in (self.conf_dir, self.log_dir, self.pid_dir, self.tmp_dir):
            directory.mkdir(parents=True, exist_ok=True)
        self.write_lib()
        write_log4j_configuration(self.conf_dir)
        target = self.conf_dir / "config.yaml"
        target.write_text(yaml.safe_dump(self.config, sort_keys=True))
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
        """Start a JobManager and ``taskmanagers`` TaskManagers; return once this cluster's
        own JobManager answers at ``rest_url`` with them registered, ``slots`` slots each.

        Nothing starts while a cluster of ``work_dir`` runs or another process listens on the
        REST or RPC port. If the cluster does not come up, the daemons started are stopped
        (their logs stay in ``log_dir``) and the error is raised.

        Raises:
            PortInUseError: another process listens on the REST or the RPC port.
            ClusterError: a cluster of ``work_dir`` runs already; the JobManager exited, or
                another server answered at ``rest_url``.
            TimeoutError: not up within ``timeout`` seconds.
        """
        self.check_can_start()
        self.write_config()
        try:
            self._script("jobmanager.sh", "start")
            resource_ids = [self.start_taskmanager() for _ in range(taskmanagers)]
            self._wait_until_up(resource_ids, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def check_can_start(self) -> None:
        """Raise ``ClusterError`` (``PortInUseError``) if ``start`` would collide with a
        running cluster of ``work_dir`` or with another process on the REST or RPC port."""
        running = [pid for pid in self._pids("standalonesession") if _alive(pid)]
        running += self.taskmanager_pids()
        if running:
            raise ClusterError(
                f"a cluster of {self.work_dir} runs already (pids {running}): stop it first "
                "(`flink-agents cluster down`)"
            )
        source = f"in {self.config_file}" if self.config_file else "in the config file"
        rest_key = "rest.bind-port" if "rest.bind-port" in self.config else "rest.port"
        checks = (
            (self.rest_port, ("rest.bind-address", "rest.address"), "REST API", rest_key),
            (self.rpc_port, ("jobmanager.bind-host", "jobmanager.rpc.address"), "RPC", None),
        )
        for port, host_keys, server, key in checks:
            for host in dict.fromkeys(str(self.config[k]) for k in host_keys if k in self.config):
                if not _port_in_use(host, port):
                    continue
                change = (
                    f"choose another with `--rest-port N` or `{key}` {source}"
                    if key
                    else f"choose another with `jobmanager.rpc.port` {source}"
                )
                raise PortInUseError(
                    f"port {port} on {host} is in use by another process; the cluster's "
                    f"{server} needs it: {change}"
                )

    def is_up(self) -> bool:
        """Whether this cluster's JobManager runs and answers at ``rest_url``."""
        return any(_alive(pid) for pid in self._pids("standalonesession")) and (
            self._answering_id() == self.cluster_id
        )

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
            self.rest_url.removeprefix("http://"),
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

    def _wait_until_up(self, resource_ids: list[str], timeout: float) -> None:
        """Until the JobManager we started answers at ``rest_url`` (the configuration it
        serves carries ``cluster_id``) with ``resource_ids`` registered, ``slots`` each."""
        deadline = time.monotonic() + timeout
        answering = None
        while time.monotonic() < deadline:
            started = self._pids("standalonesession")  # none yet: its script still runs
            if started and not any(_alive(pid) for pid in started):
                raise ClusterError(
                    f"the JobManager exited while starting; logs: {self.log_dir}"
                    f"{_tail(self.log_dir.glob('*standalonesession*.out'))}"
                )
            answering = self._answering_id()
            if answering == self.cluster_id and self._registered(resource_ids):
                return
            time.sleep(0.5)
        if answering is not None and answering != self.cluster_id:
            raise ClusterError(
                f"another server answers at {self.rest_url}, not this cluster's JobManager; "
                f"logs: {self.log_dir}"
            )
        raise TimeoutError(
            f"{len(resource_ids)} TaskManager(s) with {self.slots} slot(s) did not register "
            f"at {self.rest_url} within {timeout} s; logs: {self.log_dir}"
        )

    def _answering_id(self) -> str | None:
        """The cluster id in the configuration served at ``rest_url``: ``""`` if a server
        answers without one, ``None`` if none answers."""
        try:
            entries = self.rest("/jobmanager/config")
            served = {entry["key"]: entry["value"] for entry in entries}
        except (urllib.error.URLError, OSError, ValueError):
            return None  # nothing listens yet, or it is no HTTP server
        except (KeyError, TypeError):
            return ""  # an HTTP server, not Flink's
        return str(served.get(CLUSTER_ID_KEY, ""))

    def _registered(self, resource_ids: list[str]) -> bool:
        try:
            registered = self.rest("/taskmanagers")["taskmanagers"]
        except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
            return False
        slots = {tm.get("id"): tm.get("slotsNumber") for tm in registered}
        return all(slots.get(resource_id) == self.slots for resource_id in resource_ids)

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


def _resolve_config(
    config_file: Path | None, chosen: dict[str, Any], overrides: dict[str, Any]
) -> dict[str, Any]:
    """The cluster's configuration as flat keys (see ``StandaloneCluster``), with its ports
    resolved: 0 picks a free one."""
    config = _read_config(PYFLINK_HOME / "conf" / "config.yaml")
    config.update(DEFAULTS)
    config.update({"python.executable": sys.executable, "python.client.executable": sys.executable})
    if config_file is not None:
        config.update(_read_config(Path(config_file)))
    chosen = {key: value for key, value in chosen.items() if value is not None}
    if "rest.port" in chosen and "rest.bind-port" in config:
        chosen["rest.bind-port"] = chosen["rest.port"]  # the port chosen is the one served
    config.update(chosen)
    config.update(overrides)
    for key in ("rest.port", "rest.bind-port", "jobmanager.rpc.port"):
        if key in config:
            config[key] = _port_number(key, config[key])
    if config["rest.port"] == 0 and config.get("rest.bind-port") == 0:
        config["rest.port"] = config["rest.bind-port"] = free_port()
    for key in ("rest.port", "rest.bind-port", "jobmanager.rpc.port"):
        if config.get(key) == 0:
            config[key] = free_port()
    config["taskmanager.numberOfTaskSlots"] = _integer(
        "taskmanager.numberOfTaskSlots", config["taskmanager.numberOfTaskSlots"]
    )
    if config.get("rest.bind-port", config["rest.port"]) == config["jobmanager.rpc.port"]:
        raise ClusterError(
            f"the REST API and the RPC server would both listen on port "
            f"{config['jobmanager.rpc.port']}: give `rest.port` and `jobmanager.rpc.port` "
            "different ports"
        )
    return config


def _read_config(path: Path) -> dict[str, Any]:
    """A Flink ``config.yaml`` as flat keys; nested (``rest: {port: 8081}``) and flat
    (``rest.port: 8081``) keys alike, as Flink reads them."""
    try:
        tree = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise ClusterError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(tree, dict):
        raise ClusterError(f"{path}: not a mapping of Flink options")
    return _flatten(tree)


def _port_number(key: str, value: Any) -> int:
    """One port: the cluster is checked and reached on it (a range such as ``rest.bind-port:
    8081-8090`` names none)."""
    port = _integer(key, value, "one port number")
    if not 0 <= port <= 65535:
        raise ClusterError(f"`{key}` must be a port number from 0 to 65535 (got {value!r})")
    return port


def _integer(key: str, value: Any, what: str = "a whole number") -> int:
    if isinstance(value, bool):
        raise ClusterError(f"`{key}` must be {what} (got {value!r})")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ClusterError(f"`{key}` must be {what} (got {value!r})") from None


def _port_in_use(host: str, port: int) -> bool:
    """Whether a server listens on ``port`` at an address ``host`` resolves to (or on every
    address), so that a server there could not bind it or a client there would reach the
    other one. Binds as the JVM binds its servers, with ``SO_REUSEADDR``: the connections of
    a cluster just stopped (``TIME_WAIT``) are no conflict."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return False  # an unknown host: the JobManager's own start-up says so
    for family, kind, protocol, _, address in addresses:
        with socket.socket(family, kind, protocol) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as error:
                if error.errno == errno.EADDRINUSE:
                    return True
                # EADDRNOTAVAIL: not an address of this machine (e.g. ::1 without IPv6)
    return False


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


def _tail(files: Any, lines: int = 20) -> str:
    """The last ``lines`` lines of the newest of ``files``, as the end of a message."""
    newest = max(files, key=lambda f: f.stat().st_mtime, default=None)
    if newest is None:
        return ""
    text = newest.read_text(errors="replace").splitlines()[-lines:]
    return f"\n{newest.name}:\n" + "\n".join(text) if text else ""


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
