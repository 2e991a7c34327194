"""``OpenAIChatModel``: any OpenAI-compatible chat-completions endpoint, via ``openai``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import openai

from flink_agents._ids import durable_name
from flink_agents.api import (
    BaseChatModel,
    ChatMessage,
    ChatModelError,
    ChatResponse,
    FlinkAgentsError,
    ModelPrice,
    ResourceDescriptor,
    ResourceType,
    SizeRoute,
    ToolSpec,
)
from flink_agents.api.internal import OutputSchema, import_ref, ref_of
from flink_agents.integrations.chat._limits import RateLimiter, estimate_tokens
from flink_agents.integrations.chat._refusal import refusal_text, refused_kinds
from flink_agents.integrations.chat._retry import (
    RetryPolicy,
    describe,
    log_retry,
    retry_after,
    status_of,
)
from flink_agents.integrations.chat._wire import (
    UnsendablePart,
    message_from_wire,
    messages_to_wire,
    parse_structured,
    response_format,
    tool_to_wire,
    usage_from_wire,
)

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
API_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
MODEL_ENV = "OPENAI_MODEL"


class OpenAIChatModel(BaseChatModel):
    """A chat model behind an OpenAI-compatible API (OpenAI, vLLM, Ollama, LiteLLM, ...).

    Tool calling, structured output (``json_schema`` response format, validated into the
    pydantic model), timeouts and retries. Retrying is ours (tenacity, exponential backoff
    on timeouts, 429 and 5xx); the ``openai`` client's own retries are off so that attempts
    are counted in one place. Token usage is on each response and summed per instance.

    The API key is read from the environment (``api_key_env``) unless given; it goes to the
    client and nowhere else: not into ``repr``, errors, logs or ``descriptor()``.

    Args:
        model: the model name; default: ``$OPENAI_MODEL``.
        base_url: the API's base URL; default: ``$OPENAI_BASE_URL``, else OpenAI's.
        api_key: the key; default: the environment variable named by ``api_key_env``. A key
            given here cannot be written into a plan (see ``descriptor``).
        api_key_env: the variable holding the key.
        timeout: seconds one HTTP attempt may take.
        max_retries: retries after the first attempt.
        retry_initial_wait: seconds before the first retry, doubling each time.
        retry_max_wait: the longest wait between attempts.
        temperature: sampling temperature, when set.
        max_tokens: the most tokens a reply may have, when set.
        tools: names of tool resources offered when a request names none.
        extra_args: more request fields, passed to the endpoint as they are.
        requests_per_minute: the most requests per minute this resource sends (in one
            runner: a Flink subtask), evenly spaced; a request over it waits, in flight
            (see ``docs/spend.md``). None: no limit.
        tokens_per_minute: the most tokens per minute, spacing requests by their size
            (estimated before, corrected by the usage reported). None: no limit.
        fallbacks: chat model resources asked, in order, when this one fails for good.
        route: a module-level function (or its ``module:function`` name) given a request's
            messages, returning the chat model resource that answers it (None: this one);
            or a ``SizeRoute`` (``{"over_tokens": 8000, "to": "long_context"}``).
        prices: per million tokens, ``{"input": ..., "cached_input": ..., "output": ...}``
            or a ``ModelPrice``, for budgets' ``max_cost`` and the cost metrics.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = API_KEY_ENV,
        timeout: float = 60.0,
        max_retries: int = 3,
        retry_initial_wait: float = 0.5,
        retry_max_wait: float = 20.0,
        temperature: float | None = None,
        max_tokens: int | None = None,
        tools: Sequence[str] = (),
        extra_args: Mapping[str, Any] | None = None,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        fallbacks: Sequence[str] = (),
        route: Callable[[list[ChatMessage]], str | None]
        | SizeRoute
        | Mapping[str, Any]
        | str
        | None = None,
        prices: ModelPrice | Mapping[str, float] | None = None,
    ) -> None:
        self.model = model or os.environ.get(MODEL_ENV) or ""
        if not self.model:
            raise FlinkAgentsError(f"OpenAIChatModel needs a model: pass model= or set {MODEL_ENV}")
        self.base_url = base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL
        self.host = host_of(self.base_url)
        key = api_key if api_key is not None else os.environ.get(api_key_env)
        if not key:
            raise FlinkAgentsError(
                f"OpenAIChatModel for {self.model!r} at {self.host} has no API key: set the "
                f"environment variable {api_key_env}"
            )
        self.timeout = timeout
        self.retry = RetryPolicy(max_retries, retry_initial_wait, retry_max_wait)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.tools = tuple(tools)
        self.extra_args = dict(extra_args or {})
        self.prices = None if prices is None else ModelPrice.model_validate(prices)
        self.fallbacks = tuple(fallbacks)
        if isinstance(route, Mapping):
            route = SizeRoute.model_validate(route)
        self.route = import_ref(route) if isinstance(route, str) else route
        if self.route is not None and not (
            callable(self.route) or isinstance(self.route, SizeRoute)
        ):
            raise FlinkAgentsError(f"OpenAIChatModel route {route!r} is not a function")
        self.limiter: RateLimiter | None = None
        if requests_per_minute is not None or tokens_per_minute is not None:
            self.limiter = RateLimiter(requests_per_minute, tokens_per_minute)
        self._given = {
            "model": model,
            "base_url": base_url,
            "api_key_env": api_key_env if api_key_env != API_KEY_ENV else None,
        }
        self._key_given_in_code = api_key is not None
        self._client = openai.OpenAI(
            api_key=key, base_url=self.base_url, timeout=timeout, max_retries=0
        )
        self._async_client = openai.AsyncOpenAI(
            api_key=key, base_url=self.base_url, timeout=timeout, max_retries=0
        )
        self._async_loop: asyncio.AbstractEventLoop | None = None
        """The event loop ``achat`` ran on: its client's connections belong to it."""

    @durable_name("flink_agents.integrations.chat._openai:OpenAIChatModel.chat")
    def chat(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] | None = None,
        output_schema: OutputSchema | None = None,
    ) -> ChatResponse:
        request = self._request(messages, tools, output_schema)
        return self._response(*self._create(request), output_schema)

    @durable_name("flink_agents.integrations.chat._openai:OpenAIChatModel.achat")
    async def achat(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] | None = None,
        output_schema: OutputSchema | None = None,
    ) -> ChatResponse:
        """``chat`` through ``openai.AsyncOpenAI``: what the built-in chat action awaits, on
        the engine's event loop, so a call in flight holds no thread."""
        self._async_loop = asyncio.get_running_loop()
        request = self._request(messages, tools, output_schema)
        return self._response(*await self._acreate(request), output_schema)

    def estimate_tokens(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] | None = None
    ) -> int:
        """The base estimate plus the reply's ``max_tokens``, when set."""
        return super().estimate_tokens(messages, tools) + (self.max_tokens or 0)

    def _request(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] | None,
        output_schema: OutputSchema | None,
    ) -> dict[str, Any]:
        try:
            wire = messages_to_wire(messages)
        except UnsendablePart as unsendable:
            raise ChatModelError(
                f"{self._label()} cannot be sent a {unsendable.kind} part: {unsendable}",
                model=self.model,
                host=self.host,
                attempts=0,
                status=None,
                refused_parts=(unsendable.kind,),
            ) from None
        request: dict[str, Any] = {"model": self.model, "messages": wire}
        if tools:
            request["tools"] = [tool_to_wire(t) for t in tools]
        if output_schema is not None:
            request["response_format"] = response_format(output_schema)
        if self.temperature is not None:
            request["temperature"] = self.temperature
        if self.max_tokens is not None:
            request["max_tokens"] = self.max_tokens
        request.update(self.extra_args)
        return request

    def _response(
        self, completion: Any, attempts: int, output_schema: OutputSchema | None
    ) -> ChatResponse:
        if not completion.choices:
            raise ChatModelError(
                f"chat model {self.model!r} at {self.host} returned no choices",
                model=self.model,
                host=self.host,
                attempts=1,
                status=200,
            )
        choice = completion.choices[0]
        message = message_from_wire(choice.message)
        usage = usage_from_wire(completion.usage)
        self._add_usage(usage)
        structured = None
        if output_schema is not None and not message.tool_calls:
            structured = parse_structured(message.text, output_schema, self.model)
        return ChatResponse(
            message=message,
            usage=usage,
            structured=structured,
            model=completion.model,
            finish_reason=choice.finish_reason,
            attempts=attempts,
        )

    def _create(self, request: dict[str, Any]) -> tuple[Any, int]:
        """One call, retried by the policy, and the attempts it took; a
        ``ChatModelError`` once it gives up."""
        attempts = 0
        label = self._label()
        retrying = self.retry.retrying(log_retry(logger, label, self.retry.max_retries + 1))
        try:
            for attempt in retrying:
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    limiter = self.limiter
                    if limiter is None:
                        return self._client.chat.completions.create(**request), attempts
                    estimate = estimate_tokens(request) if limiter.limits_tokens else 0
                    limiter.wait(estimate)
                    with self._paced(limiter, estimate) as paced:
                        paced.completion = self._client.chat.completions.create(**request)
                    return paced.completion, attempts
        except openai.OpenAIError as error:
            raise self._gave_up(error, attempts, request) from error
        raise AssertionError("unreachable: tenacity either returns or raises")

    async def _acreate(self, request: dict[str, Any]) -> tuple[Any, int]:
        """``_create`` on the async client."""
        attempts = 0
        label = self._label()
        retrying = self.retry.async_retrying(log_retry(logger, label, self.retry.max_retries + 1))
        try:
            async for attempt in retrying:
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    limiter = self.limiter
                    if limiter is None:
                        completion = await self._async_client.chat.completions.create(**request)
                        return completion, attempts
                    estimate = estimate_tokens(request) if limiter.limits_tokens else 0
                    await limiter.await_turn(estimate)
                    with self._paced(limiter, estimate) as paced:
                        paced.completion = await self._async_client.chat.completions.create(
                            **request
                        )
                    return paced.completion, attempts
        except openai.OpenAIError as error:
            raise self._gave_up(error, attempts, request) from error
        raise AssertionError("unreachable: tenacity either returns or raises")

    @contextlib.contextmanager
    def _paced(self, limiter: RateLimiter, estimate: int) -> Iterator[_Paced]:
        """Around one request let go by ``limiter``: a ``429``'s ``Retry-After`` holds the
        limiter's later requests back; the usage of an answer corrects the estimate."""
        paced = _Paced()
        try:
            yield paced
        except openai.RateLimitError as error:
            limiter.pause(retry_after(error))
            raise
        usage = getattr(paced.completion, "usage", None)
        if estimate and usage is not None and usage.total_tokens:
            limiter.correct(estimate, usage.total_tokens)

    def _label(self) -> str:
        return f"chat model {self.model!r} at {self.host}"

    def _gave_up(
        self, error: openai.OpenAIError, attempts: int, request: Mapping[str, Any]
    ) -> ChatModelError:
        status = status_of(error)
        refused = refused_kinds(error, request["messages"])
        if refused:
            message = refusal_text(self._label(), refused, describe(error))
        else:
            message = (
                f"{self._label()} failed after {attempts} attempt{'s' if attempts != 1 else ''}"
                f"; last status: {status if status is not None else 'none'} ({describe(error)})"
            )
        return ChatModelError(
            message,
            model=self.model,
            host=self.host,
            attempts=attempts,
            status=status,
            refused_parts=refused,
        )

    def descriptor(self) -> ResourceDescriptor:
        """How a plan recreates this model: the arguments given, never the key.

        What was not given (model, base URL, key) is read from the environment of the
        process that creates the resource, as it was here.

        Raises:
            FlinkAgentsError: the key was given in code; it cannot go into a plan file.
        """
        if self._key_given_in_code:
            raise FlinkAgentsError(
                f"OpenAIChatModel for {self.model!r}: an api_key given in code cannot be "
                "written into an agent plan (plans are saved to files and shipped to "
                f"workers); put it in an environment variable and pass api_key_env=NAME "
                f"(default {API_KEY_ENV})"
            )
        args: dict[str, Any] = {k: v for k, v in self._given.items() if v is not None}
        defaults = RetryPolicy()
        optional = {
            "timeout": (self.timeout, 60.0),
            "max_retries": (self.retry.max_retries, defaults.max_retries),
            "retry_initial_wait": (self.retry.initial_wait, defaults.initial_wait),
            "retry_max_wait": (self.retry.max_wait, defaults.max_wait),
            "temperature": (self.temperature, None),
            "max_tokens": (self.max_tokens, None),
            "tools": (list(self.tools), []),
            "extra_args": (self.extra_args, {}),
            "requests_per_minute": (self.limiter and self.limiter.requests_per_minute, None),
            "tokens_per_minute": (self.limiter and self.limiter.tokens_per_minute, None),
            "fallbacks": (list(self.fallbacks), []),
            "route": (_route_arg(self.route), None),
            "prices": (None if self.prices is None else self.prices.model_dump(), None),
        }
        args.update({k: value for k, (value, default) in optional.items() if value != default})
        return ResourceDescriptor(OpenAIChatModel, ResourceType.CHAT_MODEL, **args)

    def close(self) -> None:
        """Close the HTTP connections: the async client's on the loop they belong to, while
        it runs (the engine closes resources before it stops its loop)."""
        self._client.close()
        loop, self._async_loop = self._async_loop, None
        if loop is None or loop.is_closed():
            return
        try:
            if _running_loop() is loop:  # on the loop itself: it cannot be waited for here
                loop.create_task(self._async_client.close())
            elif loop.is_running():
                closing = asyncio.run_coroutine_threadsafe(self._async_client.close(), loop)
                closing.result(timeout=self.timeout)
            else:
                loop.run_until_complete(self._async_client.close())
        except Exception as error:  # closing is best effort: nothing is lost
            logger.debug("closing the async client of %r failed: %s", self, error)

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r}, host={self.host!r})"


def _route_arg(route: Any) -> Any:
    """A route as a plan holds it: a ``SizeRoute``'s fields, or a function's reference."""
    if route is None:
        return None
    return route.model_dump() if isinstance(route, SizeRoute) else ref_of(route)


class _Paced:
    """The answer to a request made under a rate limit, once it came."""

    __slots__ = ("completion",)

    def __init__(self) -> None:
        self.completion: Any = None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def host_of(base_url: str) -> str:
    """Host and port only: a URL may carry credentials in its user-info part."""
    parts = urlsplit(base_url)
    host = parts.hostname or base_url
    return f"{host}:{parts.port}" if parts.port else host
