"""Prompts: message templates with ``{variables}``, filled in when an action builds a request.

Templates use ``str.format`` syntax: ``{name}``, ``{user.name}``, ``{items[0]}``; write
``{{`` and ``}}`` for literal braces. A missing variable is an error naming it, never an
empty string sent to a model.

A message template may hold parts (images, documents) beside its text: only text is filled
in, other parts are kept as they are. A variable written alone (``{photo}``: no attribute,
index, conversion or format) whose value is a part, or a list of parts, becomes those parts
in ``format_messages``, between the text before and after it; ``format``, which returns
text, refuses it.
"""

from __future__ import annotations

import string
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from flink_agents.api._chat import ChatMessage, DocumentPart, ImagePart, MessageRole, TextPart
from flink_agents.api._errors import FlinkAgentsError
from flink_agents.api._resources import ResourceDescriptor, ResourceType

_FORMATTER = string.Formatter()


class PromptFormatError(FlinkAgentsError):
    """A prompt cannot be filled in: a variable is missing or a template is malformed.

    Not a ``ValueError`` on purpose: pydantic would wrap it while validating a ``Prompt``.
    """


class Prompt(BaseModel):
    """A prompt: either one text template or a list of message templates.

    Build one with ``Prompt.from_text`` or ``Prompt.from_messages``; as a resource, a plan
    names the same constructors as providers (``flink_agents.api:Prompt.from_text``
    with ``args: {text: ...}``).
    """

    model_config = ConfigDict(frozen=True)

    text: str | None = None
    messages: tuple[ChatMessage, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> Prompt:
        if (self.text is None) == (not self.messages):
            raise ValueError("a prompt has either text or messages")
        for template in self._templates():
            _variables_of(template)
        return self

    @classmethod
    def from_text(cls, text: str) -> Prompt:
        """A prompt of one text template."""
        return cls(text=text)

    @classmethod
    def from_messages(cls, messages: Sequence[ChatMessage | Mapping[str, Any]]) -> Prompt:
        """A prompt of message templates (``ChatMessage`` s or ``{role, content}`` dicts)."""
        return cls(messages=tuple(ChatMessage.model_validate(m) for m in messages))

    @property
    def variables(self) -> list[str]:
        """The variable names the templates use, in order of first use."""
        found: dict[str, None] = {}
        for template in self._templates():
            found.update(dict.fromkeys(_variables_of(template)))
        return list(found)

    def format(self, **variables: Any) -> str:
        """The filled-in text (message prompts: their contents, one per line).

        Raises:
            PromptFormatError: a variable the template uses was not given.
        """
        if self.text is not None:
            return self._fill(self.text, variables)
        return "\n".join(
            "\n".join(self._fill(template, variables) for template in _texts(m))
            for m in self.messages
        )

    def format_messages(
        self, role: MessageRole = MessageRole.USER, **variables: Any
    ) -> list[ChatMessage]:
        """The filled-in messages; a text prompt becomes one message of ``role``. A message's
        parts other than text are kept; a variable whose value is a part (or a list of
        parts) becomes parts of its message (see the module's documentation).

        Raises:
            PromptFormatError: a variable the templates use was not given.
        """
        if self.text is not None:
            return [ChatMessage(role=role, content=self._fill_content(self.text, variables))]
        return [
            m.model_copy(update={"content": self._fill_content(m.content, variables)})
            for m in self.messages
        ]

    def descriptor(self) -> ResourceDescriptor:
        """How a plan recreates this prompt as a resource."""
        if self.text is not None:
            return ResourceDescriptor(Prompt.from_text, ResourceType.PROMPT, text=self.text)
        # (Parts are written with their type, and their bytes as base64 text.)
        messages = [m.model_dump(mode="json", exclude_defaults=True) for m in self.messages]
        return ResourceDescriptor(Prompt.from_messages, ResourceType.PROMPT, messages=messages)

    def _templates(self) -> list[str]:
        if self.text is not None:
            return [self.text]
        return [template for m in self.messages for template in _texts(m)]

    def _fill(self, template: str, variables: Mapping[str, Any]) -> str:
        self._check_given(template, variables)
        for name in _bare_fields(template):
            if _as_parts(variables[name]) is not None:
                raise PromptFormatError(
                    f"prompt variable {name!r} is an image or a document: format gives text "
                    "only, format_messages makes it a part of its message"
                )
        try:
            return template.format_map(variables)
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as error:
            raise PromptFormatError(
                f"cannot fill in prompt: {type(error).__name__}: {error}"
            ) from None

    def _check_given(self, template: str, variables: Mapping[str, Any]) -> None:
        missing = [name for name in _variables_of(template) if name not in variables]
        if missing:
            given = ", ".join(sorted(variables)) or "none"
            raise PromptFormatError(
                f"prompt variable {missing[0]!r} was not given (the prompt uses "
                f"{', '.join(self.variables)}; given: {given})"
            )

    def _fill_content(
        self, content: str | list[Part], variables: Mapping[str, Any]
    ) -> str | list[Part]:
        """A message's content filled in: text as before, unless a variable brings parts."""
        if isinstance(content, str):
            return self._fill_parts(content, variables)
        filled: list[Part] = []
        for part in content:
            if not isinstance(part, TextPart):
                filled.append(part)
                continue
            text = self._fill_parts(part.text, variables)
            filled.extend(_parts_of(text))
        return filled

    def _fill_parts(self, template: str, variables: Mapping[str, Any]) -> str | list[Part]:
        """One text template filled in: text, or parts when a variable's value is parts."""
        self._check_given(template, variables)
        if not any(_as_parts(variables[name]) is not None for name in _bare_fields(template)):
            return self._fill(template, variables)
        parts: list[Part] = []
        text = []
        for literal, field, spec, conversion in _FORMATTER.parse(template):
            text.append(literal)
            if field is None:
                continue
            inserted = None if spec or conversion else _as_parts(variables.get(field))
            if inserted is None:
                field_text = "{" + field + (f"!{conversion}" if conversion else "")
                field_text += (f":{spec}" if spec else "") + "}"
                text.append(self._fill(field_text, variables))
                continue
            parts.extend(_parts_of("".join(text)))
            text = []
            parts.extend(inserted)
        parts.extend(_parts_of("".join(text)))
        return parts


class PromptSet(ABC):
    """A resource that offers prompts under their own names (an MCP server).

    ``ctx.get_resource(name, ResourceType.PROMPT)`` finds them when no resource of that name
    is declared; ``ReActAgent(prompt=prompt_set.prompt(name))`` uses one.

    Attributes:
        name: the resource name it is declared under (the runner sets it on creation).
    """

    name: str | None = None

    @abstractmethod
    def list_prompts(self) -> list[str]:
        """The names of its prompts (listed once, then cached)."""

    @abstractmethod
    def get_prompt(self, name: str) -> Prompt | None:
        """Its prompt called ``name``, if it has one."""

    def prompt(self, name: str) -> OfferedPrompt:
        """A reference to its prompt ``name``, for ``ReActAgent(prompt=...)``; nothing is
        fetched until an action uses it."""
        return OfferedPrompt(self, name)


@dataclass(frozen=True)
class OfferedPrompt:
    """The prompt ``name`` that the resource ``source`` offers (see ``PromptSet.prompt``)."""

    source: PromptSet
    name: str


Part = TextPart | ImagePart | DocumentPart
_PARTS = (TextPart, ImagePart, DocumentPart)


def _texts(message: ChatMessage) -> list[str]:
    """A message template's text templates: its content, or its text parts."""
    if isinstance(message.content, str):
        return [message.content]
    return [part.text for part in message.content if isinstance(part, TextPart)]


def _as_parts(value: Any) -> list[Part] | None:
    """A variable's value as parts, when it is a part or a non-empty list of parts."""
    if isinstance(value, _PARTS):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, _PARTS) for v in value):
        return list(value)
    return None


def _parts_of(filled: str | list[Part]) -> list[Part]:
    """Filled text as parts (none for empty text)."""
    if isinstance(filled, str):
        return [TextPart(text=filled)] if filled else []
    return filled


def _bare_fields(template: str) -> list[str]:
    """Variables written alone in a template (``{photo}``): those a part can fill."""
    return [
        field
        for _, field, spec, conversion in _FORMATTER.parse(template)
        if field and not spec and not conversion and field.isidentifier()
    ]


def _variables_of(template: str) -> list[str]:
    """Top-level variable names of a template, e.g. ``user`` for ``{user.name}``."""
    try:
        parsed = list(_FORMATTER.parse(template))
    except ValueError as error:
        raise PromptFormatError(f"malformed prompt template {template!r}: {error}") from None
    names = []
    for _, field, spec, _ in parsed:
        if field is None:
            continue
        name = field.split(".", 1)[0].split("[", 1)[0]
        if not name or name.isdigit():
            raise PromptFormatError(
                f"prompt template {template!r} has a positional field {{{field}}}: "
                "use named variables such as {question}"
            )
        names.append(name)
        if spec:
            names.extend(_variables_of(spec))
    return names
