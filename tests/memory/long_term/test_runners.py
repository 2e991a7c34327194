"""ctx.long_term_memory and ctx.knowledge on the local runner."""

from __future__ import annotations

from pathlib import Path

import pytest

from flink_agents.api import FlinkAgentsError, RunnerContext
from flink_agents.runtime import LocalExecutionEnvironment
from tests.memory.long_term.preference_agent import PreferenceAgent


def run(store: Path, records: list[dict]) -> list:
    env = LocalExecutionEnvironment(long_term_memory_store=str(store))
    return env.from_list(records, "user").apply(PreferenceAgent).to_list()


def test_preferences_are_remembered_across_runs_and_recalled_by_meaning(tmp_path: Path) -> None:
    """A later run (a new environment on the same store) finds the preference that answers
    a question asked in other words, for that user only."""
    store = tmp_path / "vectors"
    assert (
        run(
            store,
            [
                {"user": "alice", "remember": "I am vegetarian and never eat meat."},
                {"user": "alice", "remember": "My favourite music is jazz."},
                {"user": "bob", "remember": "I support the Lyon football club."},
            ],
        )
        == ["noted"] * 3
    )
    answers = run(
        store,
        [
            {"user": "alice", "ask": "What food should I cook for her dinner?"},
            {"user": "alice", "ask": "Which songs would she enjoy?"},
            {"user": "bob", "ask": "Which songs would he enjoy?"},
            {"user": "carol", "ask": "anything"},
        ],
    )
    assert answers == [
        "I am vegetarian and never eat meat.",
        "My favourite music is jazz.",
        "I support the Lyon football club.",  # bob's only memory: never alice's
        None,
    ]


def test_a_context_without_long_term_memory_says_so() -> None:
    """The API's default tells the user what to configure."""
    with pytest.raises(FlinkAgentsError, match="no long-term memory is configured"):
        RunnerContext.long_term_memory.fget(None)
    with pytest.raises(FlinkAgentsError, match="no knowledge store"):
        RunnerContext.knowledge.fget(None)


def test_memories_handed_from_one_agent_to_another_keep_their_source(tmp_path: Path) -> None:
    """Agent A's output carries selected memories; agent B, fed that output as input, holds
    them with A as their source (seed 003), in its own memory set of the same user."""
    from tests.memory.long_term.handoff_agents import Researcher, Writer

    def env() -> LocalExecutionEnvironment:
        return LocalExecutionEnvironment(long_term_memory_store=str(tmp_path / "vectors"))

    shared = (
        env()
        .from_list(
            [
                {"user": "ana", "finding": "Tide pools host starfish and anemones."},
                {"user": "ana", "finding": "Glaciers carve U-shaped valleys."},
                {"user": "ana", "share": "sea creatures living on rocky shores"},
            ],
            "user",
        )
        .apply(Researcher)
        .to_list()
    )
    assert len(shared) == 1 and len(shared[0]["handoff"]) == 1  # only the chosen memory
    answers = (
        env()
        .from_list([*shared, {"user": "ana", "ask": "what lives on the shore?"}], "user")
        .apply(Writer)
        .to_list()
    )
    assert answers == [["Tide pools host starfish and anemones.", "researcher"]]
