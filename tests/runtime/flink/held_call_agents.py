"""The agent of the stop-with-savepoint test (module level: Flink's Python workers import it
by name).

Each record asks the scripted LLM server one question through a durable call, on the
engine's executor (``via: "executor"``, a blocking client) or on its call loop (``via:
"loop"``, an async client), and answers with one output. Before it asks, the call appends
the record's id to ``started`` (a file outside the job), so the test knows which calls are
in flight.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import openai

from flink_agents.api import Agent, InputEvent, OutputEvent, action


def _started(path: str, record_id: int) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, f"{record_id}\n".encode())  # one small O_APPEND write
    finally:
        os.close(descriptor)


def ask_blocking(base_url: str, started: str, record_id: int) -> str:
    _started(started, record_id)
    client = openai.OpenAI(base_url=base_url, api_key="stand-in", max_retries=0, timeout=120)
    with client:
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"question {record_id}"}]
        )
    return reply.choices[0].message.content


async def ask_async(base_url: str, started: str, record_id: int) -> str:
    _started(started, record_id)
    client = openai.AsyncOpenAI(base_url=base_url, api_key="stand-in", max_retries=0, timeout=120)
    async with client:
        reply = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"question {record_id}"}]
        )
    return reply.choices[0].message.content


class HeldCallAgent(Agent):
    """One durable call per record; config ``base_url`` (the scripted server) and
    ``started`` (the file of started calls)."""

    @action(InputEvent)
    async def ask(event: InputEvent, ctx: Any) -> None:
        record, config = event.input, ctx.config
        ask = ask_async if record["via"] == "loop" else ask_blocking
        answer = await ctx.durable_execute_async(
            ask, config["base_url"], config["started"], record["id"]
        )
        ctx.send_event(OutputEvent(output={"id": record["id"], "answer": answer}))


def parse_record(line: str) -> Any:
    return json.loads(line)


OUR_THREADS = ("flink-agents", "action-log")
"""How the names of the threads the runtime starts begin."""


def thread_names(_: Any) -> str:
    """The threads of ours alive in the interpreter this runs in."""
    names = sorted(t.name for t in threading.enumerate() if t.name.startswith(OUR_THREADS))
    return json.dumps(names)
