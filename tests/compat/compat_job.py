"""The MiniCluster job of the compatibility fixtures, run in a child process:
``python -m tests.compat.compat_job <spec.json>``.

``build_job`` is FROZEN once a fixture is taken with it: every fixture's savepoint maps onto
its operators by their uids, so their uids, their order and the agent's plan name must stay
as they are (a release that needs another topology adds a job module of its own, named in
its fixture's manifest). The job, in PyFlink's thread mode at parallelism 1: JSON lines from
a continuously monitored directory, ``CompatAgent`` keyed by ``key`` with a SQLite action
log at ``spec["action_log"]`` under the pinned job name ``spec["job"]``, and its outputs as
JSON lines through a sink that commits on checkpoints.

The spec (JSON): ``mode`` (``take`` or ``restore``), ``job``, ``action_log`` (a
``sqlite://`` URL), ``savepoint`` (to restore from, or null), ``work`` (a directory for
``input/``, ``out/`` and ``data/``), and ``batches``: ``[{"file": name or null,
"records": [...], "wait_ids": [...]}]``. Each batch's records are dropped into the input
directory as a file of their own, then the child waits until an output of each of
``wait_ids`` is committed.

- ``take`` serves ``llm`` from a scripted server that answers at once and ``held_llm`` from
  one that never answers while this process lives (``HeldServer``). After the batches it
  waits until the held server has received exactly ``spec["held"]`` (last user messages) and
  the action log holds exactly ``spec["log_before_stop"]`` (``log_summary``), stops the job
  with a savepoint in ``spec["savepoint_dir"]``, waits for the job's end and copies the
  action log (SQLite's backup, a consistent copy) to ``spec["log_copy"]``, all while the held
  calls are still unanswered: nothing they could record after the stop is in the copy.
- ``restore`` serves both resources from one scripted server, restores ``spec["savepoint"]``,
  runs the batches and cancels the job.

The last line of stdout is ``RESULT {...}``: ``savepoint`` (take), ``answered`` (the last
user message of every request the answering server got, in arrival order), and for take
``held`` (what the held server got) and ``log`` (what the copy of the log holds).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pyflink.common import Configuration, Duration, Encoder, Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import (
    FileSink,
    FileSource,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
)

from flink_agents._shipping import ShippedFunction
from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.runtime.action_log import key_history, open_action_log
from flink_agents.testing.llm_server import Rule, ScriptedLLMServer
from tests.compat.compat_agents import CompatAgent
from tests.memory.long_term.rescale_job import stop_with_savepoint, wait_for_answers

MAX_PARALLELISM = 128
CHECKPOINT_INTERVAL_MS = 300
DISCOVERY_INTERVAL_MS = 200
WAIT_TIMEOUT_S = 120.0
REPLY = "stand-in reply to <{last_user}>"
"""The scripted server's one rule: every reply names the prompt it answers."""


def build_job(spec: dict[str, Any]) -> StreamExecutionEnvironment:
    """The fixtures' job. FROZEN: see the module docstring."""
    work = Path(spec["work"])
    configuration = Configuration()
    configuration.set_string("python.execution-mode", "thread")
    configuration.set_string("restart-strategy.type", "none")  # a failure ends the child
    if spec["savepoint"]:
        configuration.set_string("execution.savepoint.path", spec["savepoint"])
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(1)
    env.set_max_parallelism(MAX_PARALLELISM)
    env.enable_checkpointing(CHECKPOINT_INTERVAL_MS)
    agents = AgentsExecutionEnvironment.get_execution_environment(
        env,
        data_dir=str(work / "data"),
        action_log=spec["action_log"],
        action_log_job=spec["job"],
    )
    source = (
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(work / "input"))
        .monitor_continuously(Duration.of_millis(DISCOVERY_INTERVAL_MS))
        .build()
    )
    records = (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "records")
        .uid("records")
        .map(ShippedFunction(json.loads), output_type=Types.PICKLED_BYTE_ARRAY())
        .name("parse")
        .uid("parse")
    )
    outputs = agents.from_datastream(records, "key").apply(CompatAgent).to_datastream()
    sink = (
        FileSink.for_row_format(str(work / "out"), Encoder.simple_string_encoder())
        .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
        .with_output_file_config(
            OutputFileConfig.builder().with_part_prefix("out").with_part_suffix(".jsonl").build()
        )
        .build()
    )
    (
        outputs.map(ShippedFunction(json.dumps), output_type=Types.STRING())
        .name("outputs-json")
        .uid("outputs-json")
        .sink_to(sink)
        .name("outputs")
        .uid("outputs")
    )
    return env


class HeldServer:
    """A chat endpoint that never answers while this process lives: each request is noted
    (its last user message) as it arrives and then waits. The scripted server notes a
    request only once it has answered it, too late to tell that a call is in flight."""

    def __init__(self) -> None:
        self.arrived: list[str] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True  # the waiting requests end with the process
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def received(self) -> list[str]:
        with self._lock:
            return list(self.arrived)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.arrived.append(last_user(body))
                threading.Event().wait()  # never set: no answer before the process ends

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

        return Handler


def last_user(request: dict[str, Any]) -> str:
    """The text of a chat request's last user message."""
    return [m["content"] for m in request["messages"] if m["role"] == "user"][-1]


def log_summary(url: str, job: str, keys: list[str]) -> dict[str, list[list[Any]]]:
    """What the action log at ``url`` holds of ``job``, per key: ``[run, step, action,
    completed, calls]`` for each recorded action."""
    with open_action_log(url) as log:
        summary = {}
        for key in keys:
            summary[key] = [
                [
                    run.run_sequence,
                    entry.identity.step,
                    entry.identity.action,
                    entry.completed,
                    len(entry.calls),
                ]
                for run in key_history(log, job, key).runs
                for entry in run.actions
            ]
        return summary


def wait_until(
    condition: Callable[[], bool], ended: Any, what: str, seen: Callable[[], Any]
) -> None:
    """Until ``condition()`` holds; fails, with what ``seen()`` then returns, if the job ends
    first or after ``WAIT_TIMEOUT_S``."""
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    while not condition():
        if ended.done():
            ended.result()  # raises the job's failure
            raise RuntimeError(f"the job ended before {what}; seen: {seen()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"not after {WAIT_TIMEOUT_S} s: {what}; seen: {seen()}")
        time.sleep(0.1)


def copy_log(url: str, target: Path) -> None:
    """A consistent copy of the SQLite action log at ``url`` (written meanwhile or not)."""
    source = sqlite3.connect(url.removeprefix("sqlite://"))
    copy = sqlite3.connect(target)
    try:
        with copy:
            source.backup(copy)
    finally:
        copy.close()
        source.close()


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the spec (see the module docstring); what the RESULT line reports."""
    answering = ScriptedLLMServer([Rule(reply_text=REPLY)]).start()
    held = HeldServer() if spec["mode"] == "take" else None
    # Before the JVM starts: in thread mode the workers' environment is the JVM's.
    os.environ["COMPAT_LLM_URL"] = answering.base_url
    os.environ["COMPAT_HELD_LLM_URL"] = held.base_url if held else answering.base_url
    work = Path(spec["work"])
    (work / "input").mkdir(parents=True, exist_ok=True)
    client = build_job(spec).execute_async("compat-fixture")
    ended = client.get_job_execution_result()
    for batch in spec["batches"]:
        if batch["records"]:
            # Under a hidden name first: the source skips hidden files, never reading half.
            hidden = work / "input" / f".{batch['file']}"
            hidden.write_text("".join(json.dumps(record) + "\n" for record in batch["records"]))
            hidden.rename(work / "input" / batch["file"])
        wait_for_answers(ended, work / "out", set(batch["wait_ids"]))
    result: dict[str, Any] = {}
    if held is None:
        client.cancel().result()
    else:
        want = sorted(spec["held"])
        received = held.received
        wait_until(lambda: sorted(received()) == want, ended, f"the held calls {want}", received)
        expected = spec["log_before_stop"]
        logged = lambda: log_summary(spec["action_log"], spec["job"], list(expected))  # noqa: E731
        wait_until(lambda: logged() == expected, ended, f"the log holds {expected}", logged)
        result["savepoint"] = stop_with_savepoint(client, (work / "savepoints").as_uri())
        ended.result()
        copy = Path(spec["log_copy"])
        copy_log(spec["action_log"], copy)
        result["held"] = held.received()
        # Read from a copy of the copy: opening a log sets it up, which may write to it.
        readable = copy.with_name(f"read-{copy.name}")
        copy_log(f"sqlite://{copy}", readable)
        result["log"] = log_summary(f"sqlite://{readable}", spec["job"], list(expected))
    result["answered"] = [last_user(call.request) for call in answering.calls]
    answering.stop()
    return result


def main(argv: list[str]) -> None:
    spec = json.loads(Path(argv[0]).read_text())
    print("RESULT " + json.dumps(run(spec)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
