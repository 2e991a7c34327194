"""An agent whose durable call deletes the action log's SQLite file at one record, as a lost
disk would (module level: Flink workers import it by name)."""

from __future__ import annotations

from pathlib import Path

from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action


def _work(n: int, doomed: str | None) -> int:
    if doomed is not None:
        for suffix in ("", "-wal", "-shm"):
            Path(doomed + suffix).unlink(missing_ok=True)
    return n * 2


class LoggedAgent(Agent):
    @action(InputEvent)
    @staticmethod
    def work(event: InputEvent, ctx: RunnerContext) -> None:
        n = event.input["n"]
        doomed = ctx.config["log_file"] if n == ctx.config["delete_at"] else None
        ctx.send_event(OutputEvent(output={"n": n, "twice": ctx.durable_execute(_work, n, doomed)}))
