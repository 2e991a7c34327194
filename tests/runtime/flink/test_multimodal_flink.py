"""Messages with an image and a document on MiniCluster (thread mode): the parts cross the
Python worker, Flink state and the action log, and reach the stand-in intact; a text-only
model's refusal hands the request to its fallback there as on the local runner."""

from __future__ import annotations

import json

import pytest

from flink_agents.testing.llm_server import Rule, ScriptedLLMServer
from tests.children import run_child_job
from tests.integrations.multimodal_agents import PDF, PNG

pytestmark = [pytest.mark.slow, pytest.mark.flink]

RECORDS = [
    {"id": "r1", "question": "What is in this picture?"},
    {"id": "r2", "question": "And in this picture?", "model": "text_first"},
]


def test_an_image_and_a_document_reach_the_model_from_a_flink_job(tmp_path, monkeypatch):
    rules = [Rule(last_user_contains="picture", reply_text="a test pattern")]
    with ScriptedLLMServer(rules, refuse_parts={"textonly": ["image_url", "file"]}) as server:
        monkeypatch.setenv("TEST_LLM_URL", server.base_url)
        monkeypatch.setenv("TEST_LLM_KEY", "sk-multimodal-flink-1357")
        monkeypatch.setenv("FLINK_AGENTS_DATA_DIR", str(tmp_path / "data"))
        spec_file = tmp_path / "spec.json"
        spec_file.write_text(json.dumps({"records": RECORDS}))
        outputs = run_child_job("tests.runtime.flink.multimodal_job", spec_file, "the job")
        calls = server.calls

    assert sorted(outputs, key=lambda output: output["id"]) == [
        {
            "id": key,
            "answer": "a test pattern",
            "by": "vision",
            "parts": ["text", "image", "text", "document"],
        }
        for key in ("r1", "r2")
    ]
    assert sorted((call.request["model"], call.status) for call in calls) == [
        ("scripted", 200),
        ("scripted", 200),
        ("textonly", 400),
    ]
    for call in calls:
        sent = {part.type: part.data for part in call.parts if part.data is not None}
        assert sent == {"image_url": PNG, "file": PDF}
