"""The example agent of plans/knowledge_qa.yaml: questions answered from the loaded
data/product_faq.jsonl through a chat model (the scripted server), on the local runner and
in a Flink MiniCluster job of parallelism 1, each reading the store the loader wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from flink_agents.api import AgentsExecutionEnvironment
from flink_agents.plan import load_plan
from flink_agents.runtime import load_knowledge
from flink_agents.testing.llm_server import Rule

REPO = Path(__file__).resolve().parents[3]
PLAN = REPO / "plans/knowledge_qa.yaml"
FAQ = REPO / "data/product_faq.jsonl"
SECRET = "sk-knowledge-qa-1357"

SHIPPING = "Standard shipping takes 3 to 5 business days."
RETURNS = "You can return any item within 30 days of delivery."
QUESTIONS = [
    {"user": "ana", "question": "How long does standard delivery take?"},
    {"user": "bo", "question": "Can I send back a blender I bought last week?"},
]


def script(server) -> None:
    """The stand-in answers from whichever document its system prompt holds, and admits
    ignorance otherwise: its answer shows what reached the prompt."""
    server.add_rule(Rule(system_contains=SHIPPING, reply_text="3 to 5 business days."))
    server.add_rule(Rule(system_contains=RETURNS, reply_text="Yes, within 30 days."))
    server.add_rule(Rule(reply_text="I do not know."))


def prompts(server) -> dict[str, str]:
    """The system prompt the model got, by the question asked."""
    found = {}
    for call in server.calls:
        system, user = call.request["messages"]
        assert (system["role"], user["role"]) == ("system", "user")
        found[user["content"]] = system["content"]
    return found


def check(outputs, server) -> None:
    by_user = {out["question"]: out for out in outputs}
    delivery = by_user["How long does standard delivery take?"]
    assert delivery["answer"] == "3 to 5 business days."
    assert delivery["sources"][0] == "shipping"
    refund = by_user["Can I send back a blender I bought last week?"]
    assert refund["answer"] == "Yes, within 30 days."
    assert refund["sources"][0] == "returns"
    assert all(len(out["sources"]) == 2 for out in outputs)  # the plan's max_results
    seen = prompts(server)
    assert SHIPPING in seen["How long does standard delivery take?"]
    assert RETURNS not in seen["How long does standard delivery take?"]
    assert RETURNS in seen["Can I send back a blender I bought last week?"]
    assert all(call.request["model"] == "gpt-4o-mini" for call in server.calls)


def test_the_example_answers_from_the_loaded_knowledge(tmp_path, monkeypatch, llm_server):
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    script(llm_server)
    report = load_knowledge("product_faq", FAQ, options={"data-dir": str(tmp_path)})
    assert report.added == 8
    env = AgentsExecutionEnvironment.get_execution_environment(data_dir=str(tmp_path))
    outputs = env.from_list(QUESTIONS, "user").apply(str(PLAN)).to_list()
    check(outputs, llm_server)


def test_a_question_with_nothing_loaded_fails_with_how_to_load(tmp_path, monkeypatch, llm_server):
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    env = AgentsExecutionEnvironment.get_execution_environment(
        data_dir=str(tmp_path), error_policy="error-output"
    )
    builder = env.from_list(QUESTIONS[:1], "user").apply(str(PLAN))
    assert builder.to_list() == []
    [failure] = builder.error_stream()
    assert failure["action"] == "context_retrieval_action"
    assert "flink-agents knowledge load product_faq" in failure["error"]
    assert llm_server.calls == []


@pytest.mark.flink
def test_a_parallelism_1_job_reads_what_the_loader_wrote(tmp_path, llm_server):
    """In MiniCluster the Python worker opens the store the loader wrote (one per machine)."""
    from pyflink.datastream import StreamExecutionEnvironment

    script(llm_server)
    store = str(tmp_path / "vectors")
    load_knowledge("product_faq", FAQ, options={"long-term-memory-store": store})
    # The worker may run in a JVM started before this test: the endpoint goes in the plan.
    plan = load_plan(PLAN)
    llm, *others = plan.resources
    endpoint = {"base_url": llm_server.base_url, "api_key": SECRET}
    llm = llm.model_copy(update={"args": {**llm.args, **endpoint}})
    plan = plan.model_copy(update={"resources": (llm, *others)})
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    agents = AgentsExecutionEnvironment.get_execution_environment(env, long_term_memory_store=store)
    outputs = agents.from_list(QUESTIONS, "user").apply(plan).to_list()
    check(outputs, llm_server)
