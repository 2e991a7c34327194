"""Content parts on the chat-completions wire, for the scripted stand-in: checked as OpenAI
checks them, refused as a model that takes text only refuses them, and decoded for tests.

Pure functions over a request's ``messages``; the server turns a ``PartError`` into its 400.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The part types each role may send, as OpenAI accepts them.
_ALLOWED = {
    "system": ("text",),
    "developer": ("text",),
    "user": ("text", "image_url", "input_audio", "file"),
    "assistant": ("text", "refusal"),
    "tool": ("text",),
}
REFUSABLE = ("image_url", "input_audio", "file")
"""The part types a script can make the stand-in refuse (``refuse_parts``)."""

_DATA_URL = re.compile(
    r"data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(;[^;,]*)*),(?P<data>.*)", re.DOTALL
)
_DETAILS = ("auto", "low", "high")
_AUDIO_FORMATS = ("wav", "mp3")


class PartError(ValueError):
    """A part OpenAI would refuse: the message of its 400 and the parameter it names."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class ReceivedPart:
    """One content part of a request as the stand-in received it.

    Attributes:
        message: the index of its message in the request.
        index: its index in that message's content.
        type: its type on the wire: ``text``, ``image_url``, ``file``, ``input_audio``, ...
        text: a text part's text.
        url: an image's URL when it is not a ``data:`` URL.
        data: the bytes of a ``data:`` URL, a file's ``file_data`` or an audio's data.
        mime_type: the type a ``data:`` URL names.
        detail: an image's ``detail``.
        filename: a file's ``filename``.
        file_id: a file's ``file_id``.
    """

    message: int
    index: int
    type: str
    text: str | None = None
    url: str | None = None
    data: bytes | None = None
    mime_type: str | None = None
    detail: str | None = None
    filename: str | None = None
    file_id: str | None = None


def _parts(messages: Sequence[Any]) -> Iterator[tuple[int, int, str, Any]]:
    """``(message index, part index, role, part)`` of every list content."""
    for m, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        if isinstance(content, list):
            for p, part in enumerate(content):
                yield m, p, str(message.get("role")), part


def check_parts(messages: Sequence[Any]) -> None:
    """Refuse content OpenAI refuses: a content that is neither text nor a non-empty list
    of parts, a part of a type its role may not send, a part without its fields, an image
    that is not an http(s) or base64 ``data:image/...`` URL, a file without data or id.

    Raises:
        PartError: the first such part.
    """
    for m, message in enumerate(messages):
        content = message.get("content") if isinstance(message, Mapping) else None
        where = f"messages[{m}].content"
        if isinstance(content, list) and not content:
            raise PartError(
                f"Invalid '{where}': empty array. Expected an array with minimum length 1.",
                where,
            )
        if content is not None and not isinstance(content, (str, list)):
            raise PartError(f"Invalid type for '{where}': expected a string or an array.", where)
    for m, p, role, part in _parts(messages):
        where = f"messages[{m}].content[{p}]"
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise PartError(f"Missing required parameter: '{where}.type'.", f"{where}.type")
        allowed = _ALLOWED.get(role, ("text",))
        if part["type"] not in allowed:
            supported = ", ".join(repr(kind) for kind in allowed)
            raise PartError(
                f"Invalid value: '{part['type']}'. Supported values are: {supported}.",
                f"{where}.type",
            )
        _check_part(part, where)


def _check_part(part: Mapping[str, Any], where: str) -> None:
    kind = part["type"]
    if kind == "text":
        _need_str(part, "text", where)
    elif kind == "refusal":
        _need_str(part, "refusal", where)
    elif kind == "image_url":
        image = _need_object(part, "image_url", where)
        url = _need_str(image, "url", f"{where}.image_url")
        if not url.startswith(("http://", "https://")):
            _decode_data_url(url, f"{where}.image_url.url", image=True)
        detail = image.get("detail")
        if detail is not None and detail not in _DETAILS:
            raise PartError(
                f"Invalid value: '{detail}'. Supported values are: 'auto', 'low' and 'high'.",
                f"{where}.image_url.detail",
            )
    elif kind == "file":
        file = _need_object(part, "file", where)
        if file.get("file_data") is None and file.get("file_id") is None:
            raise PartError(
                f"Missing required parameter: '{where}.file.file_data' or '{where}.file.file_id'.",
                f"{where}.file",
            )
        if file.get("file_data") is not None:
            data = _need_str(file, "file_data", f"{where}.file")
            _decode_data_url(data, f"{where}.file.file_data", image=False)
            _need_str(file, "filename", f"{where}.file")
    elif kind == "input_audio":
        audio = _need_object(part, "input_audio", where)
        _need_str(audio, "data", f"{where}.input_audio")
        if audio.get("format") not in _AUDIO_FORMATS:
            raise PartError(
                "Invalid value for 'format': expected 'wav' or 'mp3'.",
                f"{where}.input_audio.format",
            )


def _need_str(holder: Mapping[str, Any], name: str, where: str) -> str:
    value = holder.get(name)
    if not isinstance(value, str):
        raise PartError(f"Missing required parameter: '{where}.{name}'.", f"{where}.{name}")
    return value


def _need_object(holder: Mapping[str, Any], name: str, where: str) -> Mapping[str, Any]:
    value = holder.get(name)
    if not isinstance(value, Mapping):
        raise PartError(f"Missing required parameter: '{where}.{name}'.", f"{where}.{name}")
    return value


def _decode_data_url(url: str, where: str, *, image: bool) -> tuple[str | None, bytes]:
    """The type and bytes of a base64 ``data:`` URL (never quoted back in an error)."""
    match = _DATA_URL.fullmatch(url)
    mime = match.group("mime") if match else None
    if (
        match is None
        or ";base64" not in match.group("params")
        or (image and not (mime or "").startswith("image/"))
    ):
        expected = "an image MIME type" if image else "a MIME type"
        raise PartError(
            f"Invalid '{where}'. Expected a base64-encoded data URL with {expected} "
            "(e.g. 'data:image/png;base64,...'), but got an invalid value.",
            where,
        )
    try:
        return mime, base64.b64decode(match.group("data"), validate=True)
    except (binascii.Error, ValueError):
        raise PartError(f"Invalid '{where}': the base64 data cannot be decoded.", where) from None


def refused_part(messages: Sequence[Any], refused: frozenset[str]) -> PartError | None:
    """The 400 a model that takes no parts of the types ``refused`` answers, as OpenAI's
    text-only models do; None when the request carries none."""
    for m, p, _, part in _parts(messages):
        if isinstance(part, Mapping) and part.get("type") in refused:
            return PartError(
                f"Invalid content type. {part['type']} is only supported by certain models.",
                f"messages.[{m}].content.[{p}].type",
            )
    return None


def received_parts(messages: Sequence[Any]) -> list[ReceivedPart]:
    """Every content part of a request's messages, with the bytes of its ``data:`` URLs
    decoded (a part the stand-in refused as malformed is listed without them)."""
    received = []
    for m, p, _, part in _parts(messages):
        if not isinstance(part, Mapping):
            continue
        kind = str(part.get("type"))
        body = part.get(kind) if isinstance(part.get(kind), Mapping) else {}
        fields: dict[str, Any] = {"message": m, "index": p, "type": kind}
        if kind == "text":
            fields["text"] = part.get("text")
        elif kind == "image_url":
            fields["detail"] = body.get("detail")
            fields.update(_source(body.get("url")))
        elif kind == "file":
            fields["filename"] = body.get("filename")
            fields["file_id"] = body.get("file_id")
            if body.get("file_data") is not None:
                fields.update(_source(body.get("file_data")))
        elif kind == "input_audio" and isinstance(body.get("data"), str):
            with contextlib.suppress(binascii.Error, ValueError):
                fields["data"] = base64.b64decode(body["data"])
        received.append(ReceivedPart(**fields))
    return received


def _source(url: Any) -> dict[str, Any]:
    """``url`` as a part's ``url``, or its ``data:`` URL's type and bytes."""
    if not isinstance(url, str):
        return {}
    if not url.startswith("data:"):
        return {"url": url}
    try:
        mime, data = _decode_data_url(url, "", image=False)
    except PartError:
        return {}
    return {"mime_type": mime, "data": data}
