"""Our chat types to and from the OpenAI chat-completions wire format."""

from __future__ import annotations

import json
import mimetypes
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from flink_agents.api import (
    ChatMessage,
    DocumentPart,
    ImagePart,
    MessageRole,
    StructuredOutputError,
    TextPart,
    TokenUsage,
    ToolCall,
    ToolSpec,
)
from flink_agents.api.internal import OutputSchema

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]")


class UnsendablePart(Exception):
    """A part the chat-completions format cannot carry (a document by an http URL)."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind


def message_to_wire(message: ChatMessage) -> dict[str, Any]:
    content = message.content
    if not isinstance(content, str):
        content = [part_to_wire(part) for part in content]
    wire: dict[str, Any] = {"role": message.role.value, "content": content}
    if message.name and message.role is not MessageRole.TOOL:
        wire["name"] = message.name
    if message.role is MessageRole.TOOL:
        wire["tool_call_id"] = message.tool_call_id
    if message.tool_calls:
        wire["content"] = content or None
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments
                    if isinstance(call.arguments, str)
                    else json.dumps(call.arguments, ensure_ascii=False),
                },
            }
            for call in message.tool_calls
        ]
    return wire


def part_to_wire(part: TextPart | ImagePart | DocumentPart) -> dict[str, Any]:
    """One content part in the chat-completions format: text as ``text``, an image as
    ``image_url`` (its bytes as a ``data:`` URL), a document as ``file`` (its bytes as
    ``file_data``, a ``data:`` URL, with a file name).

    Raises:
        UnsendablePart: a document by an http(s) URL (chat completions take its bytes).
    """
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        image: dict[str, Any] = {"url": part.url or part.data_url()}
        if part.detail is not None:
            image["detail"] = part.detail
        return {"type": "image_url", "image_url": image}
    url = part.data_url() or part.url or ""
    if not url.startswith("data:"):
        raise UnsendablePart(
            "document",
            "chat completions take a document's bytes, not its URL: give DocumentPart(data=...)",
        )
    return {"type": "file", "file": {"file_data": url, "filename": _file_name(part, url)}}


def _file_name(part: DocumentPart, url: str) -> str:
    if part.name:
        return part.name
    mime_type = part.mime_type or url[5:].split(";", 1)[0].split(",", 1)[0]
    return "document" + (mimetypes.guess_extension(mime_type) or "")


def tool_to_wire(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }


def response_format(schema: OutputSchema) -> dict[str, Any]:
    """The ``json_schema`` response format for a pydantic model class or a JSON schema.

    Not ``strict``: strict mode rejects common schemas (optional fields, defaults), and the
    reply is validated here anyway.
    """
    if isinstance(schema, dict):
        name, body = str(schema.get("title") or "output"), schema
    else:
        name, body = schema.__name__, schema.model_json_schema()
    return {
        "type": "json_schema",
        "json_schema": {"name": _SCHEMA_NAME.sub("_", name)[:64], "schema": body},
    }


def message_from_wire(wire: Any) -> ChatMessage:
    calls = []
    for call in wire.tool_calls or ():
        raw = call.function.arguments or "{}"
        try:
            arguments: dict[str, Any] | str = json.loads(raw)
        except json.JSONDecodeError:
            arguments = raw
        if not isinstance(arguments, (dict, str)):
            arguments = raw
        calls.append(ToolCall(id=call.id, name=call.function.name, arguments=arguments))
    return ChatMessage(role=MessageRole.ASSISTANT, content=wire.content or "", tool_calls=calls)


def usage_from_wire(usage: Any) -> TokenUsage:
    if usage is None:
        return TokenUsage()
    prompt = usage.prompt_tokens or 0
    completion = usage.completion_tokens or 0
    details = getattr(usage, "prompt_tokens_details", None)
    return TokenUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=usage.total_tokens or prompt + completion,
        cached_tokens=getattr(details, "cached_tokens", None) or 0,
    )


def parse_structured(content: str, schema: OutputSchema, model: str) -> Any:
    """The reply validated into ``schema`` (a dict for a JSON-schema dict).

    Raises:
        StructuredOutputError: naming the model, the schema and what is wrong.
    """
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:  # some models wrap JSON in a code fence despite the response format
        text = fenced.group(1)
    shown = text if len(text) <= 200 else text[:197] + "..."
    if isinstance(schema, dict):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise StructuredOutputError(
                f"chat model {model!r} did not reply with JSON ({error.msg}): {shown!r}"
            ) from None
    assert isinstance(schema, type) and issubclass(schema, BaseModel)
    try:
        return schema.model_validate_json(text)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'reply'}: {e['msg']}"
            for e in error.errors()[:5]
        )
        raise StructuredOutputError(
            f"chat model {model!r} replied with something that is not a valid "
            f"{schema.__name__} ({problems}): {shown!r}"
        ) from None


def messages_to_wire(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    return [message_to_wire(m) for m in messages]
