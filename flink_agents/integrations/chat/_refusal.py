"""A model that refuses a part of a request: which kind it refused, told from its answer.

A model that takes text only answers a request with an image or a document with an HTTP
error, 400 for OpenAI ("Invalid content type. image_url is only supported by certain
models."), 400 or 422 for servers such as vLLM and Ollama, in words of their own. So a 4xx
answer to a request that carries parts other than text is taken as a refusal of them,
unless its status means something else (a wrong key, an unknown model, a rate limit, a
timeout): repeating the request cannot help, and the error says which kind of part went
unaccepted. The part the answer names (an image, a file) is the one refused; when it names
none, every kind the request carries is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import openai

# 4xx answers that are about something other than the request's content.
_NOT_ABOUT_CONTENT = frozenset({401, 403, 404, 408, 409, 429})

# Our kinds of parts by their type on the wire, and the words an answer names them by.
_KINDS = {"image_url": "image", "file": "document"}
_WORDS = {"image": ("image",), "document": ("file", "document", "pdf")}
_PLURAL = {"image": "images", "document": "documents"}


def part_kinds(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The kinds of parts other than text a request's wire messages carry, in order of
    first use: ``"image"``, ``"document"``."""
    kinds: dict[str, None] = {}
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                kind = _KINDS.get(part.get("type"))
                if kind is not None:
                    kinds[kind] = None
    return list(kinds)


def refused_kinds(error: BaseException, messages: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The kinds of parts ``error`` refused, or nothing when it is no refusal of parts."""
    if not isinstance(error, openai.APIStatusError):
        return ()
    status = error.status_code
    if not 400 <= status < 500 or status in _NOT_ABOUT_CONTENT:
        return ()
    kinds = part_kinds(messages)
    if not kinds:
        return ()
    body = error.body if isinstance(error.body, dict) else {}
    said = f"{body.get('message') or ''} {error.message}".lower()
    named = [kind for kind in kinds if any(word in said for word in _WORDS[kind])]
    return tuple(named or kinds)


def refusal_text(label: str, kinds: Sequence[str], described: str) -> str:
    """What a ``ChatModelError`` says of a refusal of ``kinds``."""
    parts = " and ".join(kinds)
    takes = " or ".join(_PLURAL[kind] for kind in kinds)
    return (
        f"{label} refused the {parts} part{'s' if len(kinds) > 1 else ''} of the request "
        f"({described}): the model may not take {takes}; send text only, or ask a model "
        "that takes them (a fallback)"
    )
