"""The skills test's MiniCluster job, in a child process (``run_child_main``): a
``ReActAgent`` with packaged skills over two records on Flink, in the default (thread)
execution mode; prints its outputs as JSON. The stand-in's address comes from
``OPENAI_BASE_URL``, which the child's Flink worker inherits."""

from __future__ import annotations

import json

from flink_agents.agents import ReActAgent
from flink_agents.api import Skills
from flink_agents.integrations.chat import OpenAIChatModel
from tests.integrations.skill_agents import PACKAGE
from tests.runtime.flink.runners import run_agent


def main() -> None:
    model = OpenAIChatModel("scripted", retry_initial_wait=0.01, max_retries=0)
    agent = ReActAgent(chat_model=model, skills=Skills.from_package(PACKAGE))
    records = [{"k": key, "question": "How many km are 3 miles?"} for key in ("a", "b")]
    print(json.dumps(sorted(run_agent("flink", agent, records, "k"))))
