"""Chat models: messages, the model interface, and the events that ask a model from an action.

An action sends a ``ChatRequestEvent`` naming a chat-model resource; the built-in chat action
(bound into every plan) calls the model through durable execution, runs any tools the model
asks for, and answers with a ``ChatResponseEvent``. Everything here is plain pydantic data, so
it pickles into Flink state and the action log.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, field_validator

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


class ChatMessage(Upgradable):
    """One message of a conversation.

    Attributes:
        role: who wrote it.
        content: its text (empty for an assistant message that only calls tools).
        tool_calls: the tools an assistant message asks for.
        tool_call_id: for a ``tool`` message, the call it answers.
        name: an optional author name (for a ``tool`` message, the tool's name).
        extra_args: values for the variables of the prompt of the chat model that answers
            (see ``docs/migrating.md``); never sent to the model.
    """

    role: MessageRole
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    extra_args: dict[str, Any] = Field(default_factory=dict)

    _digest_when_set: ClassVar[tuple[str, ...]] = ("extra_args",)
    """Fields added after calls were recorded with messages as arguments: a recorded call's
    digest (``flink_agents._ids.digest_args``) counts them only when they hold a value, so
    a call recorded before they existed still matches."""


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
        for each message's framing. Override it with the provider's tokenizer for more."""
        chars = 0
        for message in messages:
            chars += len(message.content) + 16
            for call in message.tool_calls:
                chars += len(call.name) + len(str(call.arguments))
        for spec in tools or ():
            chars += len(spec.name) + len(spec.description) + len(str(spec.parameters))
        return -(-chars // CHARS_PER_TOKEN)

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
    HTTP status; it never contains credentials.

    Attributes:
        model: the model name.
        host: the host (and port) of the endpoint.
        attempts: how many calls were made.
        status: the last HTTP status, or None for a timeout or connection failure.
    """

    def __init__(
        self, message: str, *, model: str, host: str, attempts: int, status: int | None
    ) -> None:
        super().__init__(message)
        self.model = model
        self.host = host
        self.attempts = attempts
        self.status = status

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_model_error,
            (str(self), self.model, self.host, self.attempts, self.status),
        )


def _rebuild_model_error(
    message: str, model: str, host: str, attempts: int, status: int | None
) -> ChatModelError:
    return ChatModelError(message, model=model, host=host, attempts=attempts, status=status)


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
