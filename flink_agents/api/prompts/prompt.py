"""``Prompt`` as Apache Flink Agents defines it (``flink_agents.api.prompts.prompt``).

A subclass of our ``Prompt`` with their filling rules: a variable that is not given stays
as written, as does every other brace (ours fails on a missing variable and reads ``{{`` as
an escaped brace); a text prompt formats to a system message by default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import model_validator

from flink_agents.api._chat import ChatMessage, MessageRole
from flink_agents.api._prompts import Prompt as _Prompt
from flink_agents.api._resources import ResourceDescriptor, ResourceType
from flink_agents.api.prompts.utils import format_string


class Prompt(_Prompt):
    """A prompt of one text template or of message templates, filled leniently."""

    @model_validator(mode="after")
    def _check(self) -> Prompt:  # no strict parsing of the templates: braces are text
        if (self.text is None) == (not self.messages):
            raise ValueError("a prompt has either text or messages")
        return self

    @classmethod
    def from_text(cls, text: str) -> Prompt:
        return cls(text=text)

    @classmethod
    def from_messages(cls, messages: Sequence[ChatMessage | Mapping[str, Any]]) -> Prompt:
        return cls(messages=tuple(ChatMessage.model_validate(m) for m in messages))

    @property
    def template(self) -> str | tuple[ChatMessage, ...]:
        """The text template, or the message templates."""
        return self.text if self.text is not None else self.messages

    def format_string(self, **kwargs: Any) -> str:
        """The filled text; message prompts as ``role: content`` lines."""
        if self.text is not None:
            return format_string(self.text, **kwargs)
        lines = []
        for message in self.messages:
            line = f"{message.role.value}: {format_string(message.text, **kwargs)}"
            if message.extra_args:
                line += f"{message.extra_args}"
            lines.append(line)
        return "\n".join(lines)

    def format(self, **variables: Any) -> str:
        return self.format_string(**variables)

    def format_messages(
        self, role: MessageRole = MessageRole.SYSTEM, **kwargs: Any
    ) -> list[ChatMessage]:
        """The filled messages; a text prompt is one message of ``role``."""
        if self.text is not None:
            return [ChatMessage(role=role, content=format_string(self.text, **kwargs))]
        return [
            ChatMessage(role=m.role, content=format_string(m.text, **kwargs)) for m in self.messages
        ]

    def descriptor(self) -> ResourceDescriptor:
        if self.text is not None:
            return ResourceDescriptor(Prompt.from_text, ResourceType.PROMPT, text=self.text)
        messages = [m.model_dump(mode="json", exclude_defaults=True) for m in self.messages]
        return ResourceDescriptor(Prompt.from_messages, ResourceType.PROMPT, messages=messages)


LocalPrompt = Prompt
"""Apache Flink Agents' in-code prompt class: here, ``Prompt`` itself."""

__all__ = ["LocalPrompt", "Prompt"]
