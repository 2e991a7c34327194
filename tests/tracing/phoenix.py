"""Arize Phoenix, a real OpenTelemetry trace viewer, on loopback for tests; and screenshots of its
pages taken with headless Chromium.

Phoenix lives in a venv of its own (``make .venv-phoenix/.installed``: it needs protobuf and
grpcio versions that conflict with the project's), so it runs as a subprocess and is read
back through its REST API over HTTP; nothing here imports it. What each call relies on, in
``arize-phoenix==20.26.1``:

- ``GET /healthz``: ``phoenix/server/app.py``.
- ``GET /v1/projects/{project_identifier}`` (the project's GlobalID, e.g. ``UHJvamVjdDoy``)
  and ``GET /v1/projects``: ``phoenix/server/api/routers/v1/projects.py``.
- ``GET /v1/projects/{project_identifier}/spans`` (cursor pagination, ``next_cursor``):
  ``phoenix/server/api/routers/v1/spans.py``.
- The trace page ``/projects/{project GlobalID}/traces/{OpenTelemetry trace id}``: the React
  router in ``phoenix/server/static/assets/index-*.js`` (the ``traces`` route's ``:traceId``
  child, "the GraphQL Trace.traceId OpenTelemetry trace ID, not Trace.id").

Spans are ingested asynchronously (a bulk inserter polls its queue every 0.1 s): a span that
an exporter has sent is readable a moment later, hence ``wait_for_spans``. Phoenix keeps the
first span it receives for a span id and silently drops any later one with the same id
(``phoenix/db/insertion/span.py``: ``ON CONFLICT (span_id) DO NOTHING``; span ids are unique
across all traces and projects).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PHOENIX_ENV = "FLINK_AGENTS_PHOENIX"

START_TIMEOUT_S = 120.0
STOP_GRACE_S = 10.0
SCREENSHOT_TIMEOUT_S = 120.0

# Inherited variables that would point Phoenix's interpreter at the project venv's packages
# (the test session puts its site-packages on PYTHONPATH for Flink's workers) or configure
# Phoenix or its own instrumentation (a PHOENIX_SQL_DATABASE_URL, an OTEL_* endpoint).
_NOT_INHERITED = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PHOENIX_", "OTEL_")


def phoenix_executable() -> str | None:
    """The ``phoenix`` command: ``$FLINK_AGENTS_PHOENIX`` if set, else the one that
    ``make .venv-phoenix/.installed`` installs, else None."""
    if named := os.environ.get(PHOENIX_ENV):
        return named
    installed = REPO / ".venv-phoenix" / "bin" / "phoenix"
    return str(installed) if installed.exists() else None


def chromium_executable() -> str | None:
    """Debian's Chromium, or the first ``chromium`` / ``chromium-browser`` on PATH, else None."""
    if os.access("/usr/bin/chromium", os.X_OK):
        return "/usr/bin/chromium"
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _free_port() -> int:
    """A TCP port free on loopback now (the usual race: another process may take it before
    Phoenix binds it; Phoenix then exits and ``Phoenix`` reports its log)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class PhoenixError(RuntimeError):
    """Phoenix did not start, or did not answer as expected; the message ends with its log."""


class Phoenix:
    """A ``phoenix serve`` subprocess on 127.0.0.1, its SQLite database and log in ``workdir``.

    The constructor returns once Phoenix answers HTTP; use it as a context manager, or call
    ``stop``. Phoenix is told to make no connection beyond loopback of its own accord: no
    telemetry pixels, web fonts or sandbox downloads (``PHOENIX_ALLOW_EXTERNAL_RESOURCES``),
    and no agent assistant. Its gRPC collector binds every interface (``[::]``, whatever
    ``PHOENIX_HOST`` says: ``phoenix/server/grpc_server.py``) on a random port.

    Attributes:
        url: the web UI and REST API, ``http://127.0.0.1:<port>``.
        otlp_http_endpoint: OTLP/HTTP traces, for ``OTLPSpanExporter(endpoint=...)``.
        otlp_grpc_endpoint: OTLP/gRPC, for the gRPC ``OTLPSpanExporter(endpoint=...)``.
        log: the file holding Phoenix's stdout and stderr.
        startup_s: how long Phoenix took to answer.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        executable: str | None = None,
        timeout: float = START_TIMEOUT_S,
    ) -> None:
        executable = executable or phoenix_executable()
        if executable is None:
            raise PhoenixError(
                f"no Phoenix: run `make .venv-phoenix/.installed` or set {PHOENIX_ENV}"
            )
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        port, grpc_port = _free_port(), _free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.otlp_http_endpoint = f"{self.url}/v1/traces"
        self.otlp_grpc_endpoint = f"http://127.0.0.1:{grpc_port}"
        self.log = self.workdir / "phoenix.log"
        environment = {
            name: value for name, value in os.environ.items() if not name.startswith(_NOT_INHERITED)
        }
        environment.update(
            PHOENIX_HOST="127.0.0.1",
            PHOENIX_PORT=str(port),
            PHOENIX_GRPC_PORT=str(grpc_port),
            PHOENIX_WORKING_DIR=str(self.workdir),
            PHOENIX_TELEMETRY_ENABLED="false",
            PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",
            PHOENIX_DISABLE_AGENT_ASSISTANT="true",
            # Without this, every migration's SQL (some 4,000 lines) buries the log's tail.
            PHOENIX_LOG_MIGRATIONS="false",
        )
        started = time.monotonic()
        with self.log.open("wb") as log:
            # A session of its own, so that ``stop`` reaches whatever Phoenix starts.
            self._process = subprocess.Popen(
                [executable, "serve"],
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_until_healthy(timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - started

    def __enter__(self) -> Phoenix:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _wait_until_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (code := self._process.poll()) is not None:
                raise PhoenixError(f"Phoenix exited with {code} while starting:\n{self._tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.25)
        raise PhoenixError(f"Phoenix did not answer within {timeout:.0f} s:\n{self._tail()}")

    def _tail(self) -> str:
        return f"--- {self.log} (tail) ---\n{_tail(self.log)}"

    def stop(self) -> None:
        """Terminate Phoenix (SIGTERM: it shuts down cleanly in about a second), killed if it
        has not exited after a grace period. Idempotent."""
        if self._process.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self._process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self._process.wait()

    def _signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):  # it has exited meanwhile
            os.killpg(self._process.pid, signum)

    # --- REST API ---

    def _get(self, path: str, **query: Any) -> Any:
        """The decoded JSON of ``GET path?query`` (None values left out, lists repeated)."""
        pairs = {name: value for name, value in query.items() if value is not None}
        address = f"{self.url}{path}"
        if pairs:
            address += "?" + urllib.parse.urlencode(pairs, doseq=True)
        with urllib.request.urlopen(address, timeout=30) as response:
            return json.load(response)

    @staticmethod
    def _quote(identifier: str) -> str:
        return urllib.parse.quote(identifier, safe="")

    def projects(self) -> list[str]:
        """The names of the projects Phoenix knows (the first 1000)."""
        return [project["name"] for project in self._get("/v1/projects", limit=1000)["data"]]

    def project_id(self, project: str) -> str:
        """The project's GlobalID (``base64("Project:<row id>")``), which the UI's routes and
        the GraphQL API use."""
        return self._get(f"/v1/projects/{self._quote(project)}")["data"]["id"]

    def spans(self, project: str = "default") -> list[dict[str, Any]]:
        """Every span of ``project`` in the order Phoenix stored them, as its REST API returns
        them; an empty list if the project does not exist (yet).

        Each span is a dict with ``id`` (Phoenix's GlobalID), ``name``, ``context``
        (``trace_id``, ``span_id``, in hex), ``span_kind``, ``parent_id``, ``start_time``,
        ``end_time`` (ISO 8601), ``status_code``, ``status_message``, ``attributes`` (a flat
        dict: ``{"gen_ai.usage.input_tokens": 12}``) and ``events``. Phoenix adds to what
        was sent: ``gen_ai.*`` attributes are also translated to OpenInference ones
        (``llm.token_count.prompt``, ``llm.model_name``, span kind ``LLM``).
        """
        path = f"/v1/projects/{self._quote(project)}/spans"
        found: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            try:
                page = self._get(path, limit=1000, sort="id", order="asc", cursor=cursor)
            except urllib.error.HTTPError as error:
                if error.code == 404 and not found:
                    return []
                raise
            found.extend(page["data"])
            if not (cursor := page.get("next_cursor")):
                return found

    def wait_for_spans(
        self, project: str = "default", count: int = 1, timeout: float = 60.0
    ) -> list[dict[str, Any]]:
        """``spans(project)`` once it holds at least ``count`` spans; raises ``PhoenixError``
        naming what is there after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.spans(project)
            if len(found) >= count:
                return found
            if time.monotonic() > deadline:
                raise PhoenixError(
                    f"{len(found)} of {count} spans in project {project!r} after "
                    f"{timeout:.0f} s (projects: {self.projects()}):\n{self._tail()}"
                )
            time.sleep(0.2)

    def trace_url(self, project: str, trace_id: str) -> str:
        """The UI page of one trace: its span tree, with the root span's details."""
        return f"{self.url}/projects/{self.project_id(project)}/traces/{trace_id}"


def screenshot(
    url: str,
    path: Path,
    width: int = 1600,
    height: int = 1000,
    *,
    executable: str | None = None,
    virtual_time_ms: int = 15_000,
) -> Path:
    """A PNG of ``url`` at ``width`` x ``height`` taken by headless Chromium, in ``path``; the
    page's DOM as rendered at that moment beside it (``path`` with suffix ``.html``), for
    assertions on what the page shows: a picture's size cannot tell the trace page (about
    90 KB) from Phoenix's "Something went wrong" page (about 36 KB).

    Chromium fast-forwards the page's timers through ``virtual_time_ms`` of virtual time
    before it shoots, which lets a React app fetch its data and render: at 3 s Phoenix's
    trace panel is still sliding in, at 15 s it has settled (and a budget of 100 ms made
    Chromium 156 hang without writing anything). A fresh profile each time; no background,
    sync or component-update traffic. Raises ``RuntimeError`` with Chromium's output if no
    file appears.
    """
    executable = executable or chromium_executable()
    if executable is None:
        raise RuntimeError("no Chromium (/usr/bin/chromium, chromium or chromium-browser)")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        command = [
            executable,
            "--headless",
            "--no-sandbox",  # as root (CI), and in containers without user namespaces
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            f"--virtual-time-budget={virtual_time_ms}",
            f"--screenshot={path}",
            "--dump-dom",  # to stdout, after the screenshot's virtual time
            url,
        ]
        dom, log = _run_in_own_session(command, SCREENSHOT_TIMEOUT_S)
    if not path.exists():
        raise RuntimeError(f"Chromium wrote no screenshot of {url}:\n{log[-4000:]}")
    path.with_suffix(".html").write_text(dom)
    return path


def _run_in_own_session(command: list[str], timeout: float) -> tuple[str, str]:
    """Run ``command``; its stdout and stderr. On timeout, kill its whole session (Chromium's
    zygote and renderers outlive a killed browser process otherwise)."""
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        stderr += f"\n(killed after {timeout:.0f} s)".encode()
    return stdout.decode(errors="replace"), stderr.decode(errors="replace")
