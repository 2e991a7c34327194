"""Long-term memory and knowledge inside a Flink job (MiniCluster, real keyed dispatch): the
same behaviour as on the local runner, with the embedded store opened in the Python worker."""

from __future__ import annotations

import pytest
from pyflink.datastream import StreamExecutionEnvironment

from flink_agents.api import AgentsExecutionEnvironment
from tests.memory.long_term.minicluster_agents import LibrarianAgent

pytestmark = pytest.mark.flink

RECORDS = [
    {"id": 1, "user": "ana", "remember": "I am allergic to peanuts."},
    {"id": 2, "user": "ana", "remember": "I live in Lisbon by the sea."},
    {"id": 3, "user": "bo", "remember": "I play the cello in an orchestra."},
    {"id": 4, "user": "teacher", "teach": "The Rhine flows into the North Sea."},
    {"id": 5, "user": "teacher", "teach": "Sourdough bread rises thanks to wild yeast."},
    {"id": 6, "user": "ana", "ask": "Which foods must she avoid?"},
    {"id": 7, "user": "bo", "ask": "What musical instrument does he know?"},
    {"id": 8, "user": "carol", "ask": "Which foods must she avoid?"},
    {"id": 9, "user": "ana", "look_up": "Where does that big German river end?"},
]


def test_long_term_memory_and_knowledge_in_minicluster(tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)  # one subtask: a single source keeps the list's order across keys
    agents = AgentsExecutionEnvironment.get_execution_environment(
        env, long_term_memory_store=str(tmp_path / "vectors")
    )
    outputs = agents.from_list(RECORDS, "user").apply(LibrarianAgent).to_list()
    answers = {output["id"]: output["answer"] for output in outputs}
    assert answers == {
        1: "noted",
        2: "noted",
        3: "noted",
        4: "taught",
        5: "taught",
        6: ["I am allergic to peanuts.", "user:ana"],  # by meaning, not by words
        7: ["I play the cello in an orchestra.", "user:bo"],
        8: None,  # carol sees nothing of ana's memory
        9: "The Rhine flows into the North Sea.",  # knowledge taught under another key
    }
    assert (tmp_path / "vectors" / "flink_agents_memory").is_dir()  # the machine's store
