"""The scripted LLM stand-in and content parts: it takes them as OpenAI does, refuses
malformed ones as OpenAI does, refuses a kind when told to as a text-only model does, and
gives tests what it received, bytes decoded. Over real HTTP with the real openai client."""

from __future__ import annotations

import base64

import openai
import pytest

from flink_agents.testing.llm_server import ReceivedPart, Rule, ScriptedLLMServer

PNG = b"\x89PNG\r\n\x1a\n\x00\xff\x10binary"
PDF = b"%PDF-1.7 \x00\x01 pages"


def data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


IMAGE = {"type": "image_url", "image_url": {"url": data_url("image/png", PNG), "detail": "low"}}
FILE = {
    "type": "file",
    "file": {"file_data": data_url("application/pdf", PDF), "filename": "a.pdf"},
}


def client_for(server: ScriptedLLMServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="anything", max_retries=0)


def send(server: ScriptedLLMServer, *messages: dict, model: str = "m"):
    return client_for(server).chat.completions.create(model=model, messages=list(messages))


def refusal_of(server: ScriptedLLMServer, *messages: dict, model: str = "m") -> tuple[str, str]:
    """The message and the param of the 400 the stand-in answers."""
    with pytest.raises(openai.BadRequestError) as caught:
        send(server, *messages, model=model)
    error = caught.value.body
    return error["message"], error["param"]


def user(*parts: dict) -> dict:
    return {"role": "user", "content": list(parts)}


def test_parts_are_taken_matched_by_their_text_and_recorded_with_their_bytes(llm_server):
    llm_server.add_rule(Rule(last_user_contains="what is", reply_text="seen: {last_user}"))
    text = {"type": "text", "text": "What is this?"}
    reply = send(llm_server, user(text, IMAGE, FILE))
    assert reply.choices[0].message.content == "seen: What is this?"
    [call] = llm_server.calls
    assert call.parts == [
        ReceivedPart(message=0, index=0, type="text", text="What is this?"),
        ReceivedPart(
            message=0, index=1, type="image_url", data=PNG, mime_type="image/png", detail="low"
        ),
        ReceivedPart(
            message=0,
            index=2,
            type="file",
            data=PDF,
            mime_type="application/pdf",
            filename="a.pdf",
        ),
    ]


def test_an_image_by_url_is_recorded_by_its_url(llm_server):
    image = {"type": "image_url", "image_url": {"url": "https://images.example/cat.png"}}
    send(llm_server, user(image))
    [part] = llm_server.calls[0].parts
    assert (part.url, part.data) == ("https://images.example/cat.png", None)


@pytest.mark.parametrize(
    ("message", "expected_param"),
    [
        (user(), "messages[0].content"),
        (user({"type": "text"}), "messages[0].content[0].text"),
        (user({"type": "video"}), "messages[0].content[0].type"),
        ({"role": "system", "content": [IMAGE]}, "messages[0].content[0].type"),
        (user({"type": "image_url", "image_url": {}}), "messages[0].content[0].image_url.url"),
        (
            user({"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}),
            "messages[0].content[0].image_url.url",
        ),
        (
            user({"type": "image_url", "image_url": {"url": data_url("application/pdf", PDF)}}),
            "messages[0].content[0].image_url.url",
        ),
        (
            user({"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}),
            "messages[0].content[0].image_url.url",
        ),
        (
            user(
                {
                    "type": "image_url",
                    "image_url": {"url": IMAGE["image_url"]["url"], "detail": "max"},
                }
            ),
            "messages[0].content[0].image_url.detail",
        ),
        (user({"type": "file", "file": {"filename": "a.pdf"}}), "messages[0].content[0].file"),
        (
            user({"type": "file", "file": {"file_data": data_url("application/pdf", PDF)}}),
            "messages[0].content[0].file.filename",
        ),
    ],
)
def test_a_malformed_part_is_refused_naming_it_as_openai_does(llm_server, message, expected_param):
    text, param = refusal_of(llm_server, message)
    assert param == expected_param
    assert base64.b64encode(PDF).decode() not in text
    assert llm_server.calls[0].status == 400


def test_a_script_refuses_a_kind_of_part_as_a_text_only_model_does(llm_server_factory):
    server = llm_server_factory(refuse_parts=["image_url"])
    assert refusal_of(server, user({"type": "text", "text": "hi"}, IMAGE)) == (
        "Invalid content type. image_url is only supported by certain models.",
        "messages.[0].content.[1].type",
    )
    assert send(server, user(FILE)).choices[0].message.content  # files are taken
    assert send(server, {"role": "user", "content": "text alone"}).choices[0].message.content


def test_refusals_may_differ_by_model(llm_server_factory):
    server = llm_server_factory(refuse_parts={"text-model": ["image_url", "file"], "*": ["file"]})
    assert refusal_of(server, user(FILE), model="text-model")[0].startswith(
        "Invalid content type. file"
    )
    assert refusal_of(server, user(FILE), model="other")[0].startswith("Invalid content type. file")
    assert send(server, user(IMAGE), model="other").choices[0].message.content
    assert refusal_of(server, user(IMAGE), model="text-model")[0].startswith(
        "Invalid content type. image_url"
    )


def test_refusals_come_from_a_script_and_are_checked(tmp_path):
    path = tmp_path / "script.yaml"
    path.write_text("refuse_parts: [file]\nrules:\n  - reply_text: ok\n")
    with ScriptedLLMServer.from_script(path) as server:
        assert refusal_of(server, user(FILE))[1] == "messages.[0].content.[0].type"
    with pytest.raises(ValueError, match=r"unknown part types \['image'\]"):
        ScriptedLLMServer(refuse_parts=["image"])
    with pytest.raises(ValueError, match="must be a list"):
        ScriptedLLMServer(refuse_parts="image_url")
