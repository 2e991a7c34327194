"""Flink's logs must not hold secrets.

Two classes in Flink's JVMs write every environment variable of a Python process they start
into the log, API keys included:

- Beam's ``DefaultJobBundleFactory`` (a TaskManager, or MiniCluster in a Python process), in all
  of its messages ("Closing environment ... payload", "Error cleaning up servers", "Expiring
  environment") about a Python worker;
- Flink's ``PythonEnvUtils`` (the ``flink run -py`` client), in "Starting Python process with
  environment variables" at INFO.

The project's log4j configuration, ``conf/log4j.properties``, raises both loggers above those
messages. It reaches every JVM this project starts:

- a standalone cluster (``StandaloneCluster``, ``make cluster-up``) gets it as every log4j file
  of its configuration directory (``write_log4j_configuration``), for its daemons and for
  ``flink run`` with that ``FLINK_CONF_DIR``;
- the JVM PyFlink starts in a Python process reads ``$LOG4J_PROPERTIES`` when it starts
  (``use_project_logging``: the demo, ``jobs/agent_job.py``, the test suite);
- in a JVM already running with another configuration (a user's process that made its
  ``StreamExecutionEnvironment`` first), ``silence_secret_loggers`` raises the same loggers
  before a job runs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import MutableMapping
from pathlib import Path

SECRET_LOGGERS = {
    "org.apache.beam.runners.fnexecution.control.DefaultJobBundleFactory": "OFF",
    "org.apache.flink.client.python.PythonEnvUtils": "WARN",
}
"""Loggers that write a Python process's environment variables, and the least level at which
none of their messages does."""

LOG4J_FILES = (
    "log4j.properties",  # JobManager and TaskManager daemons
    "log4j-cli.properties",  # `flink run`, and the JVM PyFlink starts in a Python process
    "log4j-console.properties",  # daemons started in the foreground
    "log4j-session.properties",  # YARN / Kubernetes session clients
)
"""The log4j files Flink's scripts and PyFlink read from a configuration directory."""

_PROJECT_LOG4J = Path(__file__).resolve().parents[3] / "conf" / "log4j.properties"

_log = logging.getLogger(__name__)


def project_log4j() -> Path | None:
    """The project's ``conf/log4j.properties``; None where only the package is installed."""
    return _PROJECT_LOG4J if _PROJECT_LOG4J.is_file() else None


def log4j_text() -> str:
    """The log4j configuration to run Flink with: the project's file or, where it is not
    there, PyFlink's own daemon configuration with the ``SECRET_LOGGERS`` raised."""
    project = project_log4j()
    if project is not None:
        return project.read_text(encoding="utf-8")
    import pyflink

    base = (Path(pyflink.__file__).parent / "conf" / "log4j.properties").read_text()
    lines = [base.rstrip("\n"), "", "# flink_agents: never log a Python process's environment."]
    for index, (name, level) in enumerate(SECRET_LOGGERS.items()):
        lines += [
            f"logger.flink_agents_secret_{index}.name = {name}",
            f"logger.flink_agents_secret_{index}.level = {level}",
        ]
    return "\n".join(lines) + "\n"


def write_log4j_configuration(conf_dir: Path) -> None:
    """Write every log4j file of the Flink configuration directory ``conf_dir``."""
    text = log4j_text()
    for name in LOG4J_FILES:
        (Path(conf_dir) / name).write_text(text, encoding="utf-8")


def use_project_logging(environ: MutableMapping[str, str] | None = None) -> Path | None:
    """Make the JVM that PyFlink starts in this process log with the project's configuration
    (``LOG4J_PROPERTIES``), unless one is chosen already. Call it before the first
    ``StreamExecutionEnvironment.get_execution_environment()``: once the JVM runs, the
    variable is not read again (``silence_secret_loggers`` then does the essential part).
    Returns the configuration the variable names, if any."""
    environ = os.environ if environ is None else environ
    if "LOG4J_PROPERTIES" not in environ:
        project = project_log4j()
        if project is None:
            return None
        environ["LOG4J_PROPERTIES"] = str(project)
    return Path(environ["LOG4J_PROPERTIES"])


def silence_secret_loggers() -> bool:
    """Raise the ``SECRET_LOGGERS`` (never lower them) in the Flink JVM this process talks to,
    whatever configuration it started with. Jobs that run in that JVM (local execution on
    MiniCluster) then log no environment; a cluster's JVMs are configured by their own files.
    Starts the JVM if none runs yet. Returns False, with a warning, if it could not."""
    from pyflink.java_gateway import get_gateway

    try:
        log4j = get_gateway().jvm.org.apache.logging.log4j
        for name, level in SECRET_LOGGERS.items():
            least = log4j.Level.toLevel(level)
            if log4j.LogManager.getLogger(name).getLevel().isLessSpecificThan(least):
                log4j.core.config.Configurator.setLevel(name, least)
    except Exception as error:  # no log4j-core in that JVM, or no JVM to talk to
        _log.warning(
            "could not raise the Flink loggers that write environment variables (%s); set "
            "them in the log4j configuration: %s",
            error,
            ", ".join(f"{name} = {level}" for name, level in SECRET_LOGGERS.items()),
        )
        return False
    return True
