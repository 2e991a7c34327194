"""Benchmark: what budgets and a rate limiter cost a chat agent's model calls.

An agent (``Asks``) sends one ``ChatRequestEvent`` per record and outputs the answer; its
chat model is the scripted stand-in on loopback, answering at once, so what is measured is
our side of a model call: the durable call, the action log and, with budgets, the budgets'
verdict (one more durable call, recorded) and the charge. Each variant runs the same records
on the local runner (``LocalExecutionEnvironment``, an in-memory action log unless said):

- ``none``: no budget, no rate limit (the reference);
- ``key``: a key budget that never runs out (its totals in short-term memory);
- ``agent``: an agent budget that never runs out (its totals in the action log's store);
- ``agent-sqlite``: the same with the action log in a SQLite file;
- ``paced``: no budget, the model paced at a rate far above what the job reaches.

Rounds run the variants in a shuffled order; the medians of the CPU time they take are
printed, per call, with each one's ratio over ``none``. There is no raw PyFlink
counterpart: the figure of interest is what a budget adds to a model call, not the
runner's own cost (``bench.async_throughput`` has that).

    PYTHONPATH=$PWD .venv/bin/python -m bench.spend_overhead [--records 400 --repeat 5]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from typing import Any

from bench._common import machine_summary
from flink_agents.api import (
    Agent,
    Budget,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceType,
    action,
    resource,
)
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.runtime import LocalExecutionEnvironment
from flink_agents.testing.llm_server import Rule, ScriptedLLMServer

PACE_ENV = "BENCH_SPEND_PACE"


class Asks(Agent):
    """One model call per record."""

    @resource(
        ResourceType.CHAT_MODEL,
        model="bench",
        base_url="${env:BENCH_LLM_URL}",
        api_key={"env": "BENCH_LLM_KEY"},
        retry_initial_wait=0.01,
    )
    @staticmethod
    def llm(**args: Any) -> OpenAIChatModel:
        pace = os.environ.get(PACE_ENV)
        return OpenAIChatModel(requests_per_minute=float(pace) if pace else None, **args)

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: Any) -> None:
        question = ChatMessage(role=MessageRole.USER, content=event.input["text"])
        ctx.send_event(ChatRequestEvent(model="llm", messages=[question]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))


ROOMY = {"window": "day", "max_calls": 10**9, "max_tokens": 10**12}


def variants(work: str) -> dict[str, dict[str, Any]]:
    return {
        "none": {},
        "key": {"budgets": [Budget(name="per-key", **ROOMY)]},
        "agent": {"budgets": [Budget(name="all", scope="agent", **ROOMY)]},
        "agent-sqlite": {
            "budgets": [Budget(name="all", scope="agent", **ROOMY)],
            "action_log": f"sqlite://{work}/log.db",
        },
        "paced": {"pace": 600_000},
    }


def run_once(records: list[dict[str, Any]], options: dict[str, Any]) -> float:
    """CPU seconds of this process (the runner, its call loop and the stand-in's threads)
    for the local runner to run ``records`` with ``options``. Wall time is no measure here:
    the local runner looks at a parked run's call on a backoff (``async-poll-interval-ms``),
    which a call that answers at once spends most of its time waiting for."""
    options = dict(options)
    pace = options.pop("pace", None)
    if pace is not None:
        os.environ[PACE_ENV] = str(pace)
    else:
        os.environ.pop(PACE_ENV, None)
    env = LocalExecutionEnvironment(**options)
    started = time.process_time()
    outputs = env.from_list(records, "k").apply(Asks).to_list()
    elapsed = time.process_time() - started
    if len(outputs) != len(records):
        raise RuntimeError(f"{len(outputs)} outputs for {len(records)} records")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=400)
    parser.add_argument("--keys", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(machine_summary())
    records = [{"k": f"k{n % args.keys}", "text": f"question {n}"} for n in range(args.records)]
    with (
        ScriptedLLMServer([Rule(reply_text="an answer")]) as server,
        tempfile.TemporaryDirectory() as work,
    ):
        os.environ["BENCH_LLM_URL"], os.environ["BENCH_LLM_KEY"] = server.base_url, "sk-bench"
        chosen = variants(work)
        run_once(records[: args.keys], {})  # warm-up: imports, the client's connections
        times: dict[str, list[float]] = {name: [] for name in chosen}
        for round_ in range(args.repeat):
            order = list(chosen)
            random.shuffle(order)
            for name in order:
                if name == "agent-sqlite" and os.path.exists(f"{work}/log.db"):
                    os.remove(f"{work}/log.db")
                times[name].append(run_once(records, chosen[name]))
            print(
                f"round {round_ + 1} (CPU s): "
                + ", ".join(f"{n} {times[n][-1]:.2f}" for n in order)
            )
    base = statistics.median(times["none"])
    print(f"\n{args.records} records, {args.keys} keys, medians of {args.repeat} rounds")
    print(f"{'variant':<14}{'CPU s':>8}{'CPU us/call':>13}{'added us':>10}{'over none':>11}")
    for name, measured in times.items():
        median = statistics.median(measured)
        print(
            f"{name:<14}{median:>8.2f}{median / args.records * 1e6:>13.0f}"
            f"{(median - base) / args.records * 1e6:>10.0f}{base / median:>11.2f}"
        )


if __name__ == "__main__":
    main()
