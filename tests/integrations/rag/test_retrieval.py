"""The built-in context-retrieval action: request and response events, from code and from a
YAML plan, over ctx.knowledge and over a vector-store resource."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from flink_agents.api import (
    ActionExecutionError,
    AgentsExecutionEnvironment,
    ContextRetrievalRequestEvent,
    ContextRetrievalResponseEvent,
    FlinkAgentsError,
)
from flink_agents.plan import plan_from_yaml
from flink_agents.runtime import load_knowledge
from tests.integrations.rag.agents import AskAgent, TwoQuestionsAgent


def run(agent, records, store: str, **options) -> list:
    env = AgentsExecutionEnvironment.get_execution_environment(
        long_term_memory_store=store, **options
    )
    return env.from_list(records).apply(agent).to_list()


def test_a_request_is_answered_with_the_closest_documents_and_their_scores(faq_store):
    [out] = run(AskAgent, [{"ask": "How long until my parcel arrives?", "set": "faq"}], faq_store)
    assert out["answers_request"] is True
    assert out["query"] == "How long until my parcel arrives?"
    assert out["source"] == "faq"
    assert out["ids"][0] == "shipping"
    assert len(out["ids"]) == 3  # the default max_results
    assert out["scores"] == sorted(out["scores"], reverse=True)
    assert all(0 < score <= 1 for score in out["scores"])
    assert out["texts"][0] == "Standard shipping takes three to five business days."


def test_max_results_bounds_the_documents(faq_store):
    records = [{"ask": "refund", "set": "faq", "limit": n} for n in (1, 2, 10)]
    assert [len(out["ids"]) for out in run(AskAgent, records, faq_store)] == [1, 2, 4]


def test_responses_are_told_apart_by_request_id(faq_store):
    questions = {"money": "Can I get a refund?", "broken": "My toaster broke after a year"}
    [found] = run(TwoQuestionsAgent, [questions], faq_store)
    assert found == {"money": "returns", "broken": "warranty"}


def test_a_missing_knowledge_set_fails_the_action_and_says_how_to_load_one(tmp_path):
    with pytest.raises(ActionExecutionError) as caught:
        run(AskAgent, [{"ask": "anything", "set": "manuals"}], str(tmp_path / "empty"))
    assert caught.value.action == "context_retrieval_action"
    assert "no knowledge set 'manuals'" in str(caught.value)
    assert "flink-agents knowledge load manuals" in str(caught.value)


def test_an_empty_set_answers_with_no_documents(tmp_path):
    store = str(tmp_path / "vectors")
    load_knowledge("empty", [], options={"long-term-memory-store": store})
    [out] = run(AskAgent, [{"ask": "anything", "set": "empty"}], store)
    assert out["ids"] == [] and out["texts"] == []


def test_a_request_names_exactly_one_source_and_a_positive_limit():
    with pytest.raises(ValidationError, match="exactly one of knowledge_set and vector_store"):
        ContextRetrievalRequestEvent(query="q")
    with pytest.raises(ValidationError, match="exactly one of knowledge_set and vector_store"):
        ContextRetrievalRequestEvent(query="q", knowledge_set="a", vector_store="b")
    with pytest.raises(ValidationError, match="max_results"):
        ContextRetrievalRequestEvent(query="q", knowledge_set="a", max_results=0)
    request = ContextRetrievalRequestEvent(query="q", vector_store="docs")
    assert request.max_results == 3 and request.source == "vector store 'docs'"


def test_texts_show_documents_as_a_prompt_would():
    from datetime import UTC, datetime

    from flink_agents.api import KnowledgeSetItem

    now = datetime.now(UTC)
    items = [
        KnowledgeSetItem(id="1", name="s", value=v, created_time=now, updated_time=now)
        for v in ({"id": "a", "text": "loaded"}, "plain", {"n": 1})
    ]
    response = ContextRetrievalResponseEvent(
        request_id=ContextRetrievalRequestEvent(query="q", knowledge_set="s").id,
        query="q",
        documents=items,
    )
    assert response.texts() == ["loaded", "plain", '{"n": 1}']


PLAN = """
name: ask_manuals
actions:
  - name: ask
    function: tests.integrations.rag.agents:AskAgent.ask
    listen_to: [InputEvent]
  - name: report
    function: tests.integrations.rag.agents:AskAgent.report
    listen_to: [flink_agents.api:ContextRetrievalResponseEvent]
resources:
  - name: manuals
    type: vector_store
    provider: flink_agents.memory.long_term:open_knowledge_set
    args: {name: manuals, store: STORE}
  - name: not_a_set
    type: vector_store
    provider: builtins:dict
"""


def manuals_plan(store: Path):
    return plan_from_yaml(PLAN.replace("STORE", str(store)))


def test_a_yaml_plan_searches_a_vector_store_resource(tmp_path, faq_store):
    """The resource is a knowledge set on a store of its own, not the runner's."""
    manuals = tmp_path / "manuals"
    documents = [
        {"id": "descale", "text": "Descale the kettle every month with white vinegar."},
        {"id": "filter", "text": "Replace the water filter of the coffee machine twice a year."},
    ]
    load_knowledge("manuals", documents, options={"long-term-memory-store": str(manuals)})
    [out] = run(
        manuals_plan(manuals), [{"ask": "limescale in my kettle", "store": "manuals"}], faq_store
    )
    assert out["answers_request"] is True
    assert out["source"] == "manuals"
    assert out["ids"] == ["descale", "filter"]


def test_a_vector_store_resource_must_be_a_knowledge_set(tmp_path, faq_store):
    with pytest.raises(ActionExecutionError, match="is a dict, not a KnowledgeSet"):
        run(manuals_plan(tmp_path / "m"), [{"ask": "q", "store": "not_a_set"}], faq_store)


def test_a_vector_store_resource_on_a_missing_set_fails_at_creation(tmp_path, faq_store):
    with pytest.raises(ActionExecutionError) as caught:
        run(manuals_plan(tmp_path / "nothing"), [{"ask": "q", "store": "manuals"}], faq_store)
    assert isinstance(caught.value.__cause__, FlinkAgentsError)
    assert "no knowledge set 'manuals'" in str(caught.value)


def test_a_vector_store_resource_releases_its_store_when_closed(tmp_path):
    from flink_agents.integrations.vector_stores.edge import EdgeVectorStore
    from flink_agents.memory.long_term import open_knowledge_set

    store = tmp_path / "manuals"
    load_knowledge("manuals", ["Descale monthly."], options={"long-term-memory-store": str(store)})
    manuals = open_knowledge_set("manuals", str(store))
    assert [hit.value["text"] for hit in manuals.search("kettle", 1)] == ["Descale monthly."]
    manuals.close()
    manuals.close()  # once only: a shared embedded store counts its openers
    EdgeVectorStore(store).close()  # nobody in this process holds it any more


def test_a_retrieval_is_traced_as_a_retriever_span_of_its_action(faq_store):
    pytest.importorskip("opentelemetry.sdk", reason="tracing needs the otel extra")
    from tests.tracing.otlp_receiver import OtlpReceiver

    with OtlpReceiver() as receiver:
        records = [{"ask": "How long until my parcel arrives?", "set": "faq"}]
        run(AskAgent, records, faq_store, tracing="otlp", tracing_endpoint=receiver.http_endpoint)
        spans = {span["span_id"]: span for span in receiver.spans()}
    [retrieval] = [s for s in spans.values() if s["name"] == "retrieval"]
    assert retrieval["attributes"]["openinference.span.kind"] == "RETRIEVER"
    assert retrieval["attributes"]["flink_agents.retrieval.documents"] == 3
    assert spans[retrieval["parent_span_id"]]["name"] == "action context_retrieval_action"
