"""Content parts of chat messages: what a part accepts and refuses, how it is written (pickle,
JSON, repr), a message's text either way, and prompts that fill text and keep parts."""

from __future__ import annotations

import base64
import pickle

import pytest
from pydantic import ValidationError

from flink_agents.api import (
    BaseChatModel,
    ChatMessage,
    ChatResponse,
    DocumentPart,
    ImagePart,
    MessageRole,
    Prompt,
    PromptFormatError,
    TextPart,
)

PNG = b"\x89PNG\r\n\x1a\n\x00\x01\x02binary"
JPEG = b"\xff\xd8\xff\xe0jpeg"
WEBP = b"RIFF\x10\x00\x00\x00WEBPVP8 "
PDF = b"%PDF-1.7 \x00\xff"


def message(*content) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=list(content))


# --- parts ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "mime_type"),
    [(PNG, "image/png"), (JPEG, "image/jpeg"), (b"GIF89a..", "image/gif"), (WEBP, "image/webp")],
)
def test_an_image_knows_its_type_from_its_bytes(data, mime_type):
    assert ImagePart(data=data).mime_type == mime_type


def test_a_document_knows_its_type_from_its_name_or_its_bytes():
    assert DocumentPart(data=b"a,b\n1,2\n", name="table.csv").mime_type == "text/csv"
    assert DocumentPart(data=PDF).mime_type == "application/pdf"
    assert DocumentPart(data=b"?", mime_type="application/x-thing").mime_type == (
        "application/x-thing"
    )


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: ImagePart(), "exactly one of url and data"),
        (lambda: ImagePart(url="https://x/a.png", data=PNG), "exactly one of url and data"),
        (lambda: ImagePart(data=b"no image"), "give mime_type"),
        (lambda: ImagePart(url="/tmp/cat.png"), "ImagePart.from_file"),
        (lambda: DocumentPart(data=b"plain bytes"), "give mime_type"),
        (lambda: ImagePart(data="not base64!"), "bytes, or their base64 text"),
        (lambda: message({"type": "video", "url": "x"}), "type"),
    ],
)
def test_a_part_that_cannot_be_sent_is_refused_when_made(make, says):
    with pytest.raises(ValidationError, match=says):
        make()


def test_parts_are_frozen_and_show_no_bytes():
    image = ImagePart(data=PNG * 1000)
    with pytest.raises(ValidationError):
        image.detail = "low"
    assert repr(image) == (
        "ImagePart(type='image', url=None, data=<17000 bytes>, mime_type='image/png', detail=None)"
    )
    inline = ImagePart(url="data:image/png;base64," + base64.b64encode(PNG).decode())
    assert "base64" not in repr(inline) and "data: URL of" in repr(inline)


def test_a_file_becomes_a_part(tmp_path):
    (tmp_path / "cat.png").write_bytes(PNG)
    (tmp_path / "report.pdf").write_bytes(PDF)
    assert ImagePart.from_file(tmp_path / "cat.png", detail="low") == ImagePart(
        data=PNG, mime_type="image/png", detail="low"
    )
    assert DocumentPart.from_file(tmp_path / "report.pdf") == DocumentPart(
        data=PDF, mime_type="application/pdf", name="report.pdf"
    )


def test_a_message_with_parts_pickles_and_names_only_the_public_package():
    original = message("What is this?", ImagePart(data=PNG), DocumentPart(data=PDF, name="r.pdf"))
    data = pickle.dumps(original)
    assert pickle.loads(data) == original
    assert b"flink_agents.api._chat" not in data
    assert b"flink_agents.api" in data


def test_json_holds_the_bytes_as_base64_and_reads_them_back():
    original = message("Look", ImagePart(data=PNG, detail="low"), DocumentPart(data=PDF))
    dumped = original.model_dump(mode="json", exclude_defaults=True)
    assert dumped["content"][1] == {
        "type": "image",
        "data": base64.b64encode(PNG).decode(),
        "mime_type": "image/png",
        "detail": "low",
    }
    assert ChatMessage.model_validate(dumped) == original
    assert ChatMessage.model_validate_json(original.model_dump_json()) == original


def test_logs_and_traces_see_the_size_of_the_bytes_not_the_bytes():
    dumped = message(ImagePart(data=PNG)).model_dump(mode="json", context={"bytes": "size"})
    assert dumped["content"][0]["data"] == "<17 bytes>"


# --- messages -------------------------------------------------------------------------------


def test_text_stays_the_common_case():
    plain = ChatMessage(role=MessageRole.USER, content="hi")
    assert (plain.content, plain.text, plain.parts) == ("hi", "hi", [TextPart(text="hi")])
    assert ChatMessage(role=MessageRole.ASSISTANT).parts == []


def test_strings_among_parts_are_text_parts_and_one_part_is_a_list():
    mixed = message("first", ImagePart(url="https://x/a.png"), "second")
    assert mixed.content[0] == TextPart(text="first")
    assert mixed.text == "first\nsecond"
    alone = ChatMessage(role=MessageRole.USER, content=ImagePart(url="https://x/a.png"))
    assert alone.content == [ImagePart(url="https://x/a.png")]
    assert alone.text == ""


def test_a_message_with_parts_is_estimated_with_fixed_costs_for_images_and_documents():
    class Model(BaseChatModel):
        def chat(self, messages, tools=None, output_schema=None) -> ChatResponse:
            raise NotImplementedError

    estimate = Model().estimate_tokens
    text = estimate([ChatMessage(role=MessageRole.USER, content="12345678")])
    assert text == 6  # (8 + 16) / 4
    with_parts = message("12345678", ImagePart(data=PNG * 10_000), DocumentPart(data=PDF))
    assert estimate([with_parts]) == text + 765 + 1500


# --- prompts --------------------------------------------------------------------------------


def test_a_variable_that_is_a_part_becomes_a_part_between_the_text_around_it():
    prompt = Prompt.from_text("Describe {photo} for {name}.")
    image = ImagePart(data=PNG)
    assert prompt.format_messages(photo=image, name="Ana") == [
        message("Describe ", image, " for Ana.")
    ]
    assert prompt.format_messages(photo="a cat", name="Ana") == [
        ChatMessage(role=MessageRole.USER, content="Describe a cat for Ana.")
    ]


def test_a_list_of_parts_becomes_parts_and_a_message_keeps_its_own_parts():
    logo = ImagePart(url="https://x/logo.png")
    prompt = Prompt.from_messages(
        [
            {"role": "system", "content": "You compare {what}."},
            message("{pages}", "Against this logo:", logo),
        ]
    )
    assert prompt.variables == ["what", "pages"]
    pages = [DocumentPart(data=PDF, name="a.pdf"), DocumentPart(data=PDF, name="b.pdf")]
    assert prompt.format_messages(what="documents", pages=pages) == [
        ChatMessage(role=MessageRole.SYSTEM, content="You compare documents."),
        message(*pages, "Against this logo:", logo),
    ]
    assert prompt.format(what="documents", pages="two files") == (
        "You compare documents.\ntwo files\nAgainst this logo:"
    )


def test_format_gives_text_only_and_refuses_a_part():
    with pytest.raises(PromptFormatError, match="'photo' is an image or a document"):
        Prompt.from_text("Describe {photo}").format(photo=ImagePart(data=PNG))


def test_a_part_used_with_a_format_or_an_attribute_is_text():
    prompt = Prompt.from_text("A {photo.mime_type} image")
    assert prompt.format_messages(photo=ImagePart(data=PNG))[0].content == "A image/png image"


def test_a_prompt_with_parts_is_written_into_a_plan_and_read_back():
    prompt = Prompt.from_messages([message("Look at {this}", ImagePart(data=PNG))])
    descriptor = prompt.descriptor()
    [written] = descriptor.args["messages"]
    assert written["content"][1]["data"] == base64.b64encode(PNG).decode()
    assert Prompt.from_messages(descriptor.args["messages"]) == prompt
