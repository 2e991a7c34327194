"""Prompts: message templates with ``{variables}``, filled in when an action builds a request.

Templates use ``str.format`` syntax: ``{name}``, ``{user.name}``, ``{items[0]}``; write
``{{`` and ``}}`` for literal braces. A missing variable is an error naming it, never an
empty string sent to a model.
"""

from __future__ import annotations

import string
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from flink_agents.api._chat import ChatMessage, MessageRole
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
        return "\n".join(self._fill(m.content, variables) for m in self.messages)

    def format_messages(
        self, role: MessageRole = MessageRole.USER, **variables: Any
    ) -> list[ChatMessage]:
        """The filled-in messages; a text prompt becomes one message of ``role``.

        Raises:
            PromptFormatError: a variable the templates use was not given.
        """
        if self.text is not None:
            return [ChatMessage(role=role, content=self._fill(self.text, variables))]
        return [
            m.model_copy(update={"content": self._fill(m.content, variables)})
            for m in self.messages
        ]

    def descriptor(self) -> ResourceDescriptor:
        """How a plan recreates this prompt as a resource."""
        if self.text is not None:
            return ResourceDescriptor(Prompt.from_text, ResourceType.PROMPT, text=self.text)
        messages = [m.model_dump(mode="json", exclude_defaults=True) for m in self.messages]
        return ResourceDescriptor(Prompt.from_messages, ResourceType.PROMPT, messages=messages)

    def _templates(self) -> list[str]:
        return [self.text] if self.text is not None else [m.content for m in self.messages]

    def _fill(self, template: str, variables: Mapping[str, Any]) -> str:
        missing = [name for name in _variables_of(template) if name not in variables]
        if missing:
            given = ", ".join(sorted(variables)) or "none"
            raise PromptFormatError(
                f"prompt variable {missing[0]!r} was not given (the prompt uses "
                f"{', '.join(self.variables)}; given: {given})"
            )
        try:
            return template.format_map(variables)
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as error:
            raise PromptFormatError(
                f"cannot fill in prompt: {type(error).__name__}: {error}"
            ) from None


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
