"""Messages with images and documents, end to end: to an OpenAI-compatible model through the
real ``openai`` client and the scripted stand-in, through prompts, memory, the action log and
a restore, and a model that takes text only refusing them."""

from __future__ import annotations

import base64
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flink_agents.api import (
    ActionExecutionError,
    ChatMessage,
    ChatModelError,
    DocumentPart,
    ImagePart,
    MessageRole,
    TextPart,
)
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.integrations.chat._limits import estimate_tokens
from flink_agents.integrations.chat._wire import messages_to_wire
from flink_agents.runtime import LocalExecutionEnvironment, LocalRunner
from flink_agents.runtime.action_log.sqlite import SqliteActionLog
from flink_agents.runtime.journal import ActionJournal
from flink_agents.testing import clean_environment
from flink_agents.testing.llm_server import Rule
from tests.integrations.multimodal_agents import CRASH_ONCE, PDF, PNG, Describes, question_of

REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-multimodal-2468"
RECORD = {"id": "r1", "question": "What is in this picture?", "image": PNG, "doc": PDF}
B64_IMAGE = base64.b64encode(PNG).decode()


@pytest.fixture
def scripted(monkeypatch, llm_server_factory):
    server = llm_server_factory(
        [Rule(last_user_contains="picture", reply_text="a test pattern")],
        refuse_parts={"textonly": ["image_url", "file"]},
    )
    monkeypatch.setenv("TEST_LLM_URL", server.base_url)
    monkeypatch.setenv("TEST_LLM_KEY", SECRET)
    return server


def user(content) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=content)


def model(server, name: str = "scripted") -> OpenAIChatModel:
    return OpenAIChatModel(name, base_url=server.base_url, api_key=SECRET, retry_initial_wait=0.01)


def test_the_image_and_the_document_arrive_at_the_model_intact(scripted):
    runner = LocalRunner(Describes)
    assert runner.run("k", RECORD) == [
        {
            "id": "r1",
            "answer": "a test pattern",
            "by": "vision",
            "parts": ["text", "image", "text", "document"],
        }
    ]
    [call] = scripted.calls
    system, user = call.request["messages"]
    assert system == {"role": "system", "content": "You describe what you are shown."}
    assert user["role"] == "user"
    [text, image, between, document] = call.parts
    assert (text.text, between.text) == ("What is in this picture? ", " Compare it with ")
    assert (image.type, image.mime_type, image.detail, image.data) == (
        "image_url",
        "image/png",
        "low",
        PNG,
    )
    assert (document.type, document.filename, document.mime_type, document.data) == (
        "file",
        "report.pdf",
        "application/pdf",
        PDF,
    )


def test_a_message_with_parts_is_stored_in_short_term_memory_and_read_back_equal(scripted):
    runner = LocalRunner(Describes)
    runner.run("k", RECORD)
    stored = runner.short_term_memory("k")["question"]
    assert stored == question_of(RECORD)[-1]
    assert [type(part) for part in stored.parts] == [TextPart, ImagePart, TextPart, DocumentPart]
    assert stored.parts[1].data == PNG
    assert stored.text == "What is in this picture? \n Compare it with "


def test_a_restored_run_replays_the_model_call_whose_request_had_parts(scripted, tmp_path):
    with SqliteActionLog(tmp_path / "log.db") as log:
        log.setup()
        first = LocalRunner(Describes, journal=ActionJournal(log, "job"))
        checkpoint = first.snapshot()  # before the record: Flink reads it again after a restore
        CRASH_ONCE.add("r1")
        with pytest.raises(ActionExecutionError, match="crashed after the model answered r1"):
            first.run("k", RECORD)
        assert len(scripted.calls) == 1
    with SqliteActionLog(tmp_path / "log.db") as log:  # the restarted job's
        second = LocalRunner(Describes, journal=ActionJournal(log, "job"))
        second.restore(checkpoint)
        [output] = second.run("k", RECORD)
    assert output["answer"] == "a test pattern"
    assert len(scripted.calls) == 1  # the recorded answer, not a second request
    assert second.short_term_memory("k")["question"].parts[1].data == PNG


def test_a_model_that_refuses_images_fails_the_run_clearly_under_the_error_policy(scripted):
    env = LocalExecutionEnvironment(error_policy="error-output")
    builder = env.from_list([{**RECORD, "model": "text_only"}], "id").apply(Describes)
    assert builder.to_list() == []
    [error] = builder.error_stream()
    assert error["error"].startswith(
        f"ChatModelError: chat model 'textonly' at 127.0.0.1:{scripted.port} refused the "
        "image part of the request (HTTP 400: Invalid content type. image_url is only "
        "supported by certain models.): the model may not take images"
    )
    assert [call.status for call in scripted.calls] == [400]  # not retried
    assert SECRET not in str(error)
    assert B64_IMAGE[:40] not in str(error)


def test_a_refused_request_goes_to_the_fallback_that_takes_images(scripted):
    runner = LocalRunner(Describes)
    [output] = runner.run("k", {**RECORD, "model": "text_first"})
    assert (output["by"], output["answer"]) == ("vision", "a test pattern")
    assert [(c.request["model"], c.status) for c in scripted.calls] == [
        ("textonly", 400),
        ("scripted", 200),
    ]


# --- the model and the wire ---------------------------------------------------------------


def test_the_refusal_names_the_kind_of_part_and_is_kept_by_pickle(scripted):
    message = user(["Read this", DocumentPart(data=PDF, name="report.pdf")])
    with pytest.raises(ChatModelError) as caught:
        model(scripted, "textonly").chat([message])
    error = caught.value
    assert (error.refused_parts, error.status, error.attempts) == (("document",), 400, 1)
    assert "refused the document part" in str(error)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.refused_parts, str(copy)) == (("document",), str(error))


def test_any_client_error_on_a_request_with_parts_is_a_refusal_without_the_bytes(scripted):
    scripted.fail_next(1, status=422)
    image = ImagePart(url=f"https://images.example/cat.png?signature={SECRET}")
    with pytest.raises(ChatModelError) as caught:
        model(scripted).chat([user(["What is it?", image])])
    assert caught.value.refused_parts == ("image",)
    assert caught.value.attempts == 1
    assert SECRET not in str(caught.value)


def test_a_client_error_on_a_text_request_is_no_refusal(scripted):
    scripted.fail_next(1, status=400)
    with pytest.raises(ChatModelError) as caught:
        model(scripted).chat([user("hello")])
    assert caught.value.refused_parts == ()
    assert "failed after 1 attempt" in str(caught.value)


def test_a_rate_limit_on_a_request_with_parts_is_retried_not_refused(scripted):
    scripted.fail_next(1, status=429, retry_after=0)
    reply = model(scripted).chat([user(["A picture", ImagePart(data=PNG)])])
    assert (reply.message.content, reply.attempts) == ("a test pattern", 2)


def test_a_document_by_url_cannot_be_sent_to_an_openai_compatible_model(scripted):
    document = DocumentPart(url="https://docs.example/report.pdf", mime_type="application/pdf")
    with pytest.raises(ChatModelError, match="take a document's bytes, not its URL") as caught:
        model(scripted).chat([user([document])])
    assert caught.value.refused_parts == ("document",)
    assert scripted.calls == []


def test_parts_are_encoded_in_the_chat_completions_format(scripted):
    message = ChatMessage(
        role=MessageRole.USER,
        content=[
            "Look",
            ImagePart(url="https://images.example/cat.png", detail="high"),
            ImagePart(data=PNG),
            DocumentPart(url="data:application/pdf;base64,JVBERg=="),
        ],
    )
    model(scripted).chat([message])
    [call] = scripted.calls
    assert call.request["messages"][0]["content"] == [
        {"type": "text", "text": "Look"},
        {
            "type": "image_url",
            "image_url": {"url": "https://images.example/cat.png", "detail": "high"},
        },
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64_IMAGE}"}},
        {
            "type": "file",
            "file": {
                "file_data": "data:application/pdf;base64,JVBERg==",
                "filename": "document.pdf",
            },
        },
    ]


def test_a_message_of_text_is_sent_as_a_string_as_before(scripted):
    model(scripted).chat([user("describe a picture")])
    assert scripted.calls[0].request["messages"] == [
        {"role": "user", "content": "describe a picture"}
    ]


def test_images_and_documents_count_a_fixed_estimate_not_their_bytes(scripted):
    text = user("What is it?")
    low = user(["What is it?", ImagePart(data=PNG * 100, detail="low")])
    high = user(["What is it?", ImagePart(data=PNG)])
    document = user(["What is it?", DocumentPart(data=PDF * 100, name="a.pdf")])
    base = model(scripted).estimate_tokens([text])
    counted = [model(scripted).estimate_tokens([m]) - base for m in (low, high, document)]
    assert counted == [85, 765, 1500]


def test_a_rate_limits_estimate_counts_parts_at_their_fixed_cost_not_their_bytes():
    def estimate(*content) -> int:
        return estimate_tokens({"messages": messages_to_wire([user(list(content))])})

    assert estimate("hi", ImagePart(data=PNG * 1000)) == estimate("hi") + 765
    assert estimate("hi", ImagePart(data=PNG, detail="low")) == estimate("hi") + 85
    assert estimate("hi", DocumentPart(data=PDF * 1000, name="a.pdf")) == estimate("hi") + 1500


# --- the README's example -------------------------------------------------------------------


def test_the_readme_example_sends_the_receipt_to_the_model(tmp_path, llm_server):
    llm_server.add_rule(Rule(last_user_contains="total", reply_text="The total is 12.50"))
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    (code,) = [block for block in blocks if "ReadsReceipts" in block]
    (tmp_path / "receipts.py").write_text(code)
    (tmp_path / "receipt.png").write_bytes(PNG)
    env = {
        **clean_environment(),
        "OPENAI_BASE_URL": llm_server.base_url,
        "OPENAI_API_KEY": SECRET,
        "FLINK_AGENTS_DATA_DIR": str(tmp_path / "data"),
    }
    result = subprocess.run(
        [sys.executable, "receipts.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "['The total is 12.50']"
    [call] = llm_server.calls
    assert [(part.type, part.data) for part in call.parts] == [("text", None), ("image_url", PNG)]
