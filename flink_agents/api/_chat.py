"""Chat models: messages, the model interface, and the events that ask a model from an action.

An action sends a ``ChatRequestEvent`` naming a chat-model resource; the built-in chat action
(bound into every plan) calls the model through durable execution, runs any tools the model
asks for, and answers with a ``ChatResponseEvent``. Everything here is plain pydantic data, so
it pickles into Flink state and the action log.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import mimetypes
import threading
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal
from uuid import UUID

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FieldSerializationInfo,
    SerializerFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)

from flink_agents.api._errors import FlinkAgentsError
from flink_agents.api._events import Event
from flink_agents.api._refs import import_ref, ref_of
from flink_agents.api._upgrade import Upgradable

if TYPE_CHECKING:
    from flink_agents.api._spend import ModelPrice, SizeRoute
    from flink_agents.api._tools import ToolSpec

CHARS_PER_TOKEN = 4
"""How ``BaseChatModel.estimate_tokens`` sizes text: about four characters of English a token
for the tokenizers of current models."""

DEFAULT_MAX_STEPS = 10
"""Model calls one chat request may make (each tool round costs one) before it fails."""

IMAGE_TOKENS = 765
"""How ``BaseChatModel.estimate_tokens`` sizes an image: what OpenAI's models charge for a
1024x1024 image at high detail (larger images cost more, and a provider's own count may
differ: override ``estimate_tokens`` to be exact)."""

LOW_DETAIL_IMAGE_TOKENS = 85
"""An image sent with ``detail="low"``: one fixed tile, whatever its size."""

DOCUMENT_TOKENS = 1500
"""How ``BaseChatModel.estimate_tokens`` sizes a document: a guess of a few pages, since a
document's tokens depend on what the provider extracts from it."""


class MessageRole(StrEnum):
    """Who wrote a message."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class ToolCall(BaseModel):
    """A model's request to call one tool.

    ``arguments`` is the parsed JSON object, or the raw text when the model wrote invalid
    JSON (the tool call then fails and the model is told why).
    """

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_wire_form(cls, value: Any) -> Any:
        # A call as the chat-completions API writes it (and Apache Flink Agents' chat
        # models return it): {"id", "type": "function", "function": {"name", "arguments"}}.
        if isinstance(value, dict) and isinstance(value.get("function"), dict):
            function = value["function"]
            arguments = function.get("arguments", {})
            if isinstance(arguments, str):  # JSON text; kept as it is when not JSON (the
                # call then fails and the model is told why)
                with contextlib.suppress(ValueError):
                    arguments = json.loads(arguments) if arguments.strip() else {}
            return {
                "id": str(value.get("id", "")),
                "name": function.get("name"),
                "arguments": arguments,
            }
        return value


# --- content parts ----------------------------------------------------------------------


class TextPart(BaseModel):
    """Text among the parts of a message.

    Attributes:
        text: the text.
    """

    model_config = ConfigDict(frozen=True)

    type: Literal["text"] = "text"
    text: str

    @model_serializer(mode="wrap")
    def _tagged(self, handler: SerializerFunctionWrapHandler) -> Any:
        dumped = handler(self)
        return {"type": self.type, **dumped} if isinstance(dumped, dict) else dumped


class _MediaPart(BaseModel):
    """What image and document parts share: bytes or a URL, and how the bytes are written.

    ``data`` is bytes. In JSON (``model_dump(mode="json")``, plans, long-term memory) it is
    written as base64 text, and base64 text is read back as the bytes; under the
    serialization context ``{"bytes": "size"}`` (the event log and traces) it is written as
    ``"<N bytes>"`` instead. ``repr`` shows the size, never the bytes.
    """

    model_config = ConfigDict(frozen=True)

    kind: ClassVar[str]
    type: str
    url: str | None = None
    data: bytes | None = None
    mime_type: str | None = None

    @field_validator("data", mode="before")
    @classmethod
    def _bytes(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise ValueError(
                    "data must be bytes, or their base64 text (as JSON holds them)"
                ) from None
        if isinstance(value, (bytearray, memoryview)):
            return bytes(value)
        return value

    @model_serializer(mode="wrap")
    def _tagged(self, handler: SerializerFunctionWrapHandler) -> Any:
        # The type tells the parts apart when read back: kept under exclude_defaults too.
        dumped = handler(self)
        return {"type": self.type, **dumped} if isinstance(dumped, dict) else dumped

    @field_serializer("data", when_used="json-unless-none")
    def _bytes_as_text(self, data: bytes | None, info: FieldSerializationInfo) -> str | None:
        if data is None:
            return None
        context = info.context
        if isinstance(context, dict) and context.get("bytes") == "size":
            return f"<{len(data)} bytes>"
        return base64.b64encode(data).decode("ascii")

    def _check_source(self) -> None:
        if (self.url is None) == (self.data is None):
            raise ValueError(f"{self.kind} part needs exactly one of url and data")
        if self.url is not None and not self.url.startswith(("http://", "https://", "data:")):
            raise ValueError(
                f"{self.kind} part url must be an http(s) or a data: URL, got "
                f"{self.url[:40]!r}: read a local file with {type(self).__name__}.from_file"
            )

    def data_url(self) -> str | None:
        """The bytes as a ``data:<mime type>;base64,...`` URL (None for a part by URL)."""
        if self.data is None:
            return None
        return f"data:{self.mime_type};base64,{base64.b64encode(self.data).decode('ascii')}"

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            if name == "data" and value is not None:
                yield name, _Size(len(value))
            elif name == "url" and value is not None and value.startswith("data:"):
                yield name, _Size(len(value), "data: URL of")
            else:
                yield name, value


class ImagePart(_MediaPart):
    """An image among the parts of a message: by URL, or by its bytes.

    Attributes:
        url: where the model fetches it (``https://...``), or a ``data:`` URL.
        data: the image's bytes (sent inline, as a ``data:`` URL).
        mime_type: ``image/png``, ``image/jpeg``, ...; read from the bytes of PNG, JPEG,
            GIF and WebP images when not given.
        detail: how closely the model looks (OpenAI: ``"low"``, ``"high"``, ``"auto"``);
            None: the provider's default.
    """

    kind: ClassVar[str] = "image"
    type: Literal["image"] = "image"
    detail: str | None = None

    @model_validator(mode="after")
    def _check(self) -> ImagePart:
        self._check_source()
        if self.data is not None and self.mime_type is None:
            sniffed = _image_type(self.data)
            if sniffed is None:
                raise ValueError(
                    "image part: give mime_type (the bytes are no PNG, JPEG, GIF or WebP)"
                )
            object.__setattr__(self, "mime_type", sniffed)
        return self

    @classmethod
    def from_file(
        cls, path: str | Path, mime_type: str | None = None, detail: str | None = None
    ) -> ImagePart:
        """An image part holding a file's bytes (its type from its name, else its bytes)."""
        path = Path(path)
        guessed = mime_type or mimetypes.guess_type(path.name)[0]
        return cls(data=path.read_bytes(), mime_type=guessed, detail=detail)


class DocumentPart(_MediaPart):
    """A document (a PDF, ...) among the parts of a message: by its bytes, or a URL.

    Attributes:
        data: the document's bytes (OpenAI-compatible models take documents this way).
        url: a ``data:`` URL, or where a model that fetches documents finds it.
        mime_type: ``application/pdf``, ...; read from ``name``, or from the bytes of a PDF,
            when not given.
        name: the file name the model is told.
    """

    kind: ClassVar[str] = "document"
    type: Literal["document"] = "document"
    name: str | None = None

    @model_validator(mode="after")
    def _check(self) -> DocumentPart:
        self._check_source()
        if self.data is not None and self.mime_type is None:
            guessed = mimetypes.guess_type(self.name)[0] if self.name else None
            if guessed is None and self.data.startswith(b"%PDF"):
                guessed = "application/pdf"
            if guessed is None:
                raise ValueError("document part: give mime_type (or a name with a known suffix)")
            object.__setattr__(self, "mime_type", guessed)
        return self

    @classmethod
    def from_file(cls, path: str | Path, mime_type: str | None = None) -> DocumentPart:
        """A document part holding a file's bytes, named by the file."""
        path = Path(path)
        return cls(data=path.read_bytes(), mime_type=mime_type, name=path.name)


ContentPart = Annotated[TextPart | ImagePart | DocumentPart, Field(discriminator="type")]
"""One part of a message's content, told apart by its ``type``: ``"text"``, ``"image"`` or
``"document"``."""

_PART_TYPES = (TextPart, ImagePart, DocumentPart)


class _Size:
    """Shows as ``<N bytes>`` in a ``repr``."""

    def __init__(self, size: int, what: str = "") -> None:
        self.text = f"<{what + ' ' if what else ''}{size} bytes>"

    def __repr__(self) -> str:
        return self.text


_IMAGE_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def _image_type(data: bytes) -> str | None:
    """The type of an image's bytes, by their first bytes (the four formats models take)."""
    for signature, mime_type in _IMAGE_SIGNATURES:
        if data.startswith(signature):
            return mime_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def part_tokens(part: TextPart | ImagePart | DocumentPart) -> int:
    """About how many tokens a non-text part costs (0 for text: it is counted as text)."""
    if isinstance(part, ImagePart):
        return LOW_DETAIL_IMAGE_TOKENS if part.detail == "low" else IMAGE_TOKENS
    if isinstance(part, DocumentPart):
        return DOCUMENT_TOKENS
    return 0


class ChatMessage(Upgradable):
    """One message of a conversation.

    Attributes:
        role: who wrote it (the user, by default).
        content: its text (empty for an assistant message that only calls tools), or a list
            of parts: text, images and documents (``TextPart``, ``ImagePart``,
            ``DocumentPart``). A str in that list is a ``TextPart``, one part alone a list
            of it. Read ``text`` for the text either way.
        tool_calls: the tools an assistant message asks for.
        tool_call_id: for a ``tool`` message, the call it answers.
        name: an optional author name (for a ``tool`` message, the tool's name).
        extra_args: values for the variables of the prompt of the chat model that answers
            (see ``docs/migrating.md``); never sent to the model.
    """

    role: MessageRole = MessageRole.USER
    content: str | list[ContentPart] = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    extra_args: dict[str, Any] = Field(default_factory=dict)

    _digest_when_set: ClassVar[tuple[str, ...]] = ("extra_args",)
    """Fields added after calls were recorded with messages as arguments: a recorded call's
    digest (``flink_agents._ids.digest_args``) counts them only when they hold a value, so
    a call recorded before they existed still matches."""

    @field_validator("content", mode="before")
    @classmethod
    def _as_parts(cls, value: Any) -> Any:
        if isinstance(value, _PART_TYPES):
            return [value]
        if isinstance(value, (list, tuple)):
            return [TextPart(text=item) if isinstance(item, str) else item for item in value]
        return value

    @property
    def text(self) -> str:
        """The message's text: ``content`` itself, or its text parts one per line."""
        content = self.content
        if isinstance(content, str):
            return content
        return "\n".join(part.text for part in content if isinstance(part, TextPart))

    @property
    def parts(self) -> list[TextPart | ImagePart | DocumentPart]:
        """``content`` as parts (a text one for text; none for empty text)."""
        content = self.content
        if isinstance(content, str):
            return [TextPart(text=content)] if content else []
        return list(content)


class TokenUsage(Upgradable):
    """Tokens a model call (or a sum of calls) consumed.

    Attributes:
        prompt_tokens: input tokens, cached ones included.
        completion_tokens: output tokens.
        total_tokens: both.
        cached_tokens: the input tokens the provider served from its prompt cache (priced
            lower by most providers).
    """

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
        )


class ChatResponse(Upgradable):
    """What one model call returned.

    Attributes:
        message: the assistant's message (text and/or tool calls).
        usage: the tokens this call consumed.
        structured: with an ``output_schema``, the reply validated into it (a pydantic
            instance, or a dict for a JSON-schema dict); None otherwise or on tool calls.
        model: the model that answered, as the provider reports it.
        finish_reason: why the model stopped, as the provider reports it.
        attempts: the requests the call took (1 when no retry was needed).
    """

    message: ChatMessage
    usage: TokenUsage = Field(default_factory=TokenUsage)
    structured: Any = None
    model: str | None = None
    finish_reason: str | None = None
    attempts: int = 1

    @property
    def content(self) -> str | list[ContentPart]:
        """``message.content`` (a model called by hand answers a message in Apache Flink
        Agents: their code reads the reply's ``content``)."""
        return self.message.content


OutputSchema = type[BaseModel] | dict[str, Any]


class BaseChatModel(ABC):
    """A chat model: the integration point for model providers.

    Instances are resources: created once per runner (per Flink subtask) and shared by every
    key, so ``chat`` must be thread-safe (durable calls run on a thread pool). The runtime
    calls ``chat`` through durable execution, so a recovered job reuses recorded replies.

    A model may also define ``achat``: ``chat`` as an ``async def`` method, on an async
    client. The built-in chat action then awaits ``achat`` instead, on the engine's event
    loop, so a request in flight holds no thread of the pool (``max-in-flight`` alone bounds
    them). ``achat`` must not block.

    Attributes:
        tools: names of the tool resources this model may call when a request names none.
        achat: the async variant of ``chat`` (same arguments, same result), or None.
        fallbacks: names of chat model resources the built-in chat action asks, in order,
            when this model fails for good (``ChatModelError``: after its retries, on a
            timeout, a rate limit or a refused request).
        route: a module-level function given a request's messages that returns the name of
            the chat model resource to ask instead (None: this one), its pick recorded in
            the action log like a durable call; or a ``SizeRoute`` (requests over a size go
            elsewhere).
    """

    tools: tuple[str, ...] = ()
    fallbacks: tuple[str, ...] = ()
    route: Callable[[list[ChatMessage]], str | None] | SizeRoute | None = None
    prices: ModelPrice | None = None
    """What this model costs per million tokens, for budgets' ``max_cost`` and the cost
    metrics (a job's ``model-prices`` option overrides it)."""

    def estimate_tokens(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] | None = None
    ) -> int:
        """About how many tokens a call will use, before it is made (budgets check a call
        by it): the messages' and tools' text at four characters a token, a few tokens
        for each message's framing, ``IMAGE_TOKENS`` an image (``LOW_DETAIL_IMAGE_TOKENS``
        at low detail) and ``DOCUMENT_TOKENS`` a document. Override it with the provider's
        tokenizer for more."""
        chars = tokens = 0
        for message in messages:
            chars += len(message.text) + 16
            if not isinstance(message.content, str):
                tokens += sum(part_tokens(part) for part in message.content)
            for call in message.tool_calls:
                chars += len(call.name) + len(str(call.arguments))
        for spec in tools or ():
            chars += len(spec.name) + len(spec.description) + len(str(spec.parameters))
        return -(-chars // CHARS_PER_TOKEN) + tokens

    achat: Callable[..., Awaitable[ChatResponse]] | None = None

    @abstractmethod
    def chat(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] | None = None,
        output_schema: OutputSchema | None = None,
    ) -> ChatResponse:
        """Send ``messages`` and return the model's reply.

        Args:
            messages: the conversation so far.
            tools: tools the model may call; their ``name`` is what a ``ToolCall`` names.
            output_schema: a pydantic model class (or a JSON schema) the final reply must
                match; the parsed value is returned as ``ChatResponse.structured``.

        Raises:
            ChatModelError: the call failed for good (after any retries).
            StructuredOutputError: the reply does not match ``output_schema``.
        """

    @property
    def usage(self) -> TokenUsage:
        """Tokens this instance consumed so far (all keys, all runs of this runner)."""
        return _usage_of(self)

    def _add_usage(self, usage: TokenUsage) -> None:
        """Count a call's tokens into this instance's totals (thread-safe)."""
        counter = _counter_of(self)
        with counter.lock:
            counter.total = counter.total + usage


class _UsageCounter:
    __slots__ = ("lock", "total")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.total = TokenUsage()


_COUNTERS_LOCK = threading.Lock()


def _counter_of(model: BaseChatModel) -> _UsageCounter:
    counter = model.__dict__.get("_usage_counter")
    if counter is None:
        with _COUNTERS_LOCK:
            counter = model.__dict__.setdefault("_usage_counter", _UsageCounter())
    return counter


def _usage_of(model: BaseChatModel) -> TokenUsage:
    counter = _counter_of(model)
    with counter.lock:
        return counter.total


class ChatModelError(FlinkAgentsError):
    """A model call failed for good.

    The message names the model, the host of its base URL, the attempts made and the last
    HTTP status; it never contains credentials, nor the bytes of a message's parts.

    Attributes:
        model: the model name.
        host: the host (and port) of the endpoint.
        attempts: how many calls were made.
        status: the last HTTP status, or None for a timeout or connection failure.
        refused_parts: the kinds of parts (``"image"``, ``"document"``) the model refused
            (a model that takes text only); empty for any other failure.
    """

    def __init__(
        self,
        message: str,
        *,
        model: str,
        host: str,
        attempts: int,
        status: int | None,
        refused_parts: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.model = model
        self.host = host
        self.attempts = attempts
        self.status = status
        self.refused_parts = tuple(refused_parts)

    def __reduce__(self) -> tuple[Any, ...]:
        fields = (str(self), self.model, self.host, self.attempts, self.status)
        if self.refused_parts:  # else as before it existed: the same bytes in the action log
            fields += (self.refused_parts,)
        return (_rebuild_model_error, fields)


def _rebuild_model_error(
    message: str,
    model: str,
    host: str,
    attempts: int,
    status: int | None,
    refused_parts: tuple[str, ...] = (),
) -> ChatModelError:
    return ChatModelError(
        message,
        model=model,
        host=host,
        attempts=attempts,
        status=status,
        refused_parts=refused_parts,
    )


class StructuredOutputError(FlinkAgentsError, ValueError):
    """A model's final reply does not match the requested output schema."""


class LoopLimitExceededError(FlinkAgentsError):
    """A chat request's tool loop (a ReAct agent's run) reached one of its limits without a
    final answer: model calls (``max_steps``), tokens (``max_total_tokens``) or wall time
    (``max_time``). The run fails with it, under the error policy.

    Attributes:
        limit: which limit: ``"steps"``, ``"tokens"`` or ``"time"``.
        used: what the loop had used when it stopped (calls, tokens, or seconds).
        allowed: the limit.
    """

    def __init__(self, message: str, *, limit: str, used: float, allowed: float) -> None:
        super().__init__(message)
        self.limit = limit
        self.used = used
        self.allowed = allowed

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_limit_error, (type(self), str(self), self.limit, self.used, self.allowed))


def _rebuild_limit_error(
    cls: type[LoopLimitExceededError], message: str, limit: str, used: float, allowed: float
) -> LoopLimitExceededError:
    return cls(message, limit=limit, used=used, allowed=allowed)


class MaxStepsExceededError(LoopLimitExceededError):
    """A chat request (or a ReAct agent) used its model calls without a final answer."""

    def __init__(
        self, message: str, *, limit: str = "steps", used: float = 0, allowed: float = 0
    ) -> None:
        super().__init__(message, limit=limit, used=used, allowed=allowed)


# --- events -------------------------------------------------------------------------------


class ChatRequestEvent(Event):
    """Ask the chat model resource ``model`` to answer ``messages``.

    The built-in chat action answers with a ``ChatResponseEvent`` whose ``request_id`` is
    this event's ``id``. If the model calls tools, the built-in tool action runs them and the
    model is asked again, up to ``max_steps`` model calls.

    Attributes:
        model: name of a ``chat_model`` resource.
        messages: the conversation to answer.
        tools: names of ``tool`` resources the model may call; None uses the model's own
            ``tools`` (an empty list offers none).
        output_schema: the pydantic model class (stored as its ``module:qualname``) or JSON
            schema the final answer must match.
        max_steps: the most model calls this request may make.
        max_total_tokens: the most tokens (prompt and completion, summed over the request's
            model calls) it may use before another call; None: no limit.
        max_time: the longest the request may take, from its first model call to its
            last (the runner's processing time, tool calls and waits included); None: no
            limit.

    The limits are checked before each further model call (and ``max_steps`` when the model
    asks for tools again): a request over one fails with ``LoopLimitExceededError``
    (``MaxStepsExceededError`` for ``max_steps``). A final answer is never thrown away: the
    call that overran a limit still answers the request if it needs no tools.
    """

    EVENT_TYPE: ClassVar[str | None] = "_chat_request_event"

    model: str
    messages: list[ChatMessage]
    tools: list[str] | None = None
    output_schema: str | dict[str, Any] | None = None
    max_steps: int = Field(default=DEFAULT_MAX_STEPS, ge=1)
    max_total_tokens: int | None = Field(default=None, ge=1)
    max_time: timedelta | None = None

    @field_validator("max_time")
    @classmethod
    def _positive_time(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value <= timedelta(0):
            raise ValueError(f"max_time must be positive, got {value}")
        return value

    @field_validator("output_schema", mode="before")
    @classmethod
    def _schema_by_reference(cls, value: Any) -> Any:
        if isinstance(value, BaseModel) and hasattr(value, "output_schema"):
            value = value.output_schema  # Apache Flink Agents' OutputSchema wrapper
        # Events are pickled into state and the action log: keep a class as its name.
        if isinstance(value, type):
            if not issubclass(value, BaseModel):
                raise ValueError(f"output_schema must be a pydantic model, got {value!r}")
            return ref_of(value)
        return value


class ChatResponseEvent(Event):
    """The final answer to a ``ChatRequestEvent``.

    Attributes:
        request_id: the ``id`` of the request it answers.
        model: the chat model resource that answered.
        response: the final assistant message.
        structured_output: with an ``output_schema``, the answer validated into it.
        usage: tokens used by all model calls of the request.
    """

    EVENT_TYPE: ClassVar[str | None] = "_chat_response_event"

    request_id: UUID
    model: str
    response: ChatMessage
    structured_output: Any = None
    usage: TokenUsage = Field(default_factory=TokenUsage)


def resolve_output_schema(schema: str | dict[str, Any] | None) -> OutputSchema | None:
    """The schema object a ``ChatRequestEvent.output_schema`` names."""
    if schema is None or isinstance(schema, dict):
        return schema
    target = import_ref(schema)
    if not (isinstance(target, type) and issubclass(target, BaseModel)):
        raise FlinkAgentsError(f"output_schema {schema!r} is not a pydantic model class")
    return target
