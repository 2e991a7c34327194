"""A scripted OpenAI-compatible HTTP server that stands in for an LLM in tests and demos.

The real model cannot be reached offline, and a mocked client would not exercise what breaks in
production: HTTP, retries, timeouts, and calls made from other processes (Flink's Python
workers). This is a real HTTP server on loopback that answers ``POST /v1/chat/completions``,
``POST /v1/embeddings`` and ``GET /v1/models`` from a list of :class:`Rule` objects, records
every call, and can inject failures and delays. Every answer is labelled as a stand-in
(``system_fingerprint`` and the models' ``owned_by``) so it is never mistaken for a model.

For tests of token budgets and rate limits, a rule can report any token usage (cached prompt
tokens included), an injected failure can carry a ``Retry-After``, and a sliding-window limit
on chat requests answers 429 as OpenAI does, to prove that clients respect it.

Messages may carry content parts (text, ``image_url``, ``file``, ``input_audio``): they are
checked as OpenAI checks them (a malformed part is a 400 naming it), rules match their text
parts, and ``RecordedCall.parts`` gives every part received with its bytes decoded. With
``refuse_parts`` the stand-in answers a request carrying parts of those types with the 400
of a model that takes text only.

Example::

    with ScriptedLLMServer([Rule(last_user_contains="hello", reply_text="hi!")]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="anything")
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hello"}])

Embedding vectors are hashed from the input's words: deterministic and of the right size, but
with no semantic meaning. Use them to test plumbing, never retrieval quality.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import signal
import socket
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal, TextIO

from flink_agents.testing._llm_parts import (
    REFUSABLE,
    PartError,
    ReceivedPart,
    check_parts,
    received_parts,
    refused_part,
)
from flink_agents.testing._llm_script import (
    RequestWindow,
    Rule,
    ToolCallSpec,
    chat_usage,
    count_words,
    embed,
    fill_placeholders,
    load_script,
    message_text,
    prompt_words,
    tool_call_json,
)

__all__ = [
    "STAND_IN_FINGERPRINT",
    "STAND_IN_OWNER",
    "ReceivedPart",
    "RecordedCall",
    "Rule",
    "ScriptedLLMServer",
    "ToolCallSpec",
    "serve",
]

STAND_IN_FINGERPRINT = "flink-agents-scripted-stand-in"
STAND_IN_OWNER = "flink-agents-test-stand-in"
STAND_IN_MODEL = "scripted-stand-in"
DEFAULT_REPLY = "(scripted stand-in reply: no rule matched)"

Endpoint = Literal["chat", "embeddings", "models"]
_ROUTES: dict[tuple[str, str], Endpoint] = {
    ("POST", "/v1/chat/completions"): "chat",
    ("POST", "/v1/embeddings"): "embeddings",
    ("GET", "/v1/models"): "models",
}
_RESPONSE_FORMATS = ("text", "json_object", "json_schema")


@dataclass(frozen=True)
class RecordedCall:
    """One request the server answered, for assertions after the fact.

    ``request`` is the JSON body (``{}`` for a GET; ``{"_unparsed": text}`` when the body was
    not a JSON object). ``response`` is the JSON body sent back, error bodies included.
    ``at`` is the wall-clock time (``time.time()``) the request arrived.
    """

    endpoint: Endpoint
    request: dict[str, Any]
    status: int
    response: dict[str, Any] | None
    at: float

    @property
    def parts(self) -> list[ReceivedPart]:
        """The content parts of a chat request's messages, ``data:`` URLs decoded to bytes
        (text parts included; a message whose content is a string has none)."""
        messages = self.request.get("messages")
        return received_parts(messages) if isinstance(messages, list) else []


class _ApiError(Exception):
    """An answer in OpenAI's error shape, raised anywhere while handling a request."""

    def __init__(
        self,
        status: int,
        message: str,
        kind: str = "invalid_request_error",
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
        self.headers = dict(headers or {})


def _injected_error(status: int, retry_after: float | None) -> _ApiError:
    if status == 429:
        kind, code = "requests", "rate_limit_exceeded"
    elif status >= 500:
        kind, code = "server_error", None
    else:
        kind, code = "invalid_request_error", None
    if retry_after is None and status == 429:
        retry_after = 0
    headers = {} if retry_after is None else {"Retry-After": _seconds_text(retry_after)}
    message = f"scripted failure injected by fail_next (HTTP {status})"
    return _ApiError(status, message, kind, code, headers)


def _rate_limited(window: RequestWindow, wait: float) -> _ApiError:
    """The 429 of the scripted rate limit; ``Retry-After`` is rounded up to the millisecond."""
    retry_after = max(0.001, math.ceil(round(wait * 1000, 6)) / 1000)
    message = (
        f"scripted rate limit reached: {window.requests_per_minute} requests per minute "
        f"({window.allowed:g} per {window.window_s:g} s); try again in {retry_after:g} s"
    )
    headers = {"Retry-After": _seconds_text(retry_after)}
    return _ApiError(429, message, "requests", "rate_limit_exceeded", headers)


def _seconds_text(seconds: float) -> str:
    """A ``Retry-After`` value: an integer when whole, else the shortest plain decimal."""
    if float(seconds).is_integer():
        return str(int(seconds))
    return format(Decimal(repr(float(seconds))), "f")  # never "1e-05"


class ScriptedLLMServer:
    """An OpenAI-compatible server on loopback that answers from scripted rules.

    Rules are tried in order and the first that matches (and has uses left) answers; with no
    match the server replies ``default_reply`` (``None`` makes that a 400 error instead, for
    tests that want every call scripted). Safe to use from many threads and processes.

    With a rate limit (``requests_per_minute``, or :meth:`set_rate_limit` for a shorter
    window), a chat request that would exceed it is answered 429 with ``Retry-After``.

    Args:
        rules: the initial rules; more can be added with :meth:`add_rule`.
        default_reply: the text answered when no rule matches; placeholders work here too.
        latency_s: seconds every request waits before it is answered.
        embedding_dim: the length of embedding vectors (a request's ``dimensions`` overrides).
        host: the address to bind; keep loopback unless workers run on other machines.
        port: the port to bind; 0 picks a free one (read it back from :attr:`base_url`).
        requests_per_minute: a rate limit on chat requests over a 60 s window; None for none.
        refuse_parts: part types (``image_url``, ``file``, ``input_audio``) the stand-in
            refuses with the 400 of a model that takes text only: a list (every model), or
            a mapping of model names to lists (``"*"``: every other model).
    """

    def __init__(
        self,
        rules: Sequence[Rule] = (),
        *,
        default_reply: str | None = DEFAULT_REPLY,
        latency_s: float = 0.0,
        embedding_dim: int = 32,
        host: str = "127.0.0.1",
        port: int = 0,
        requests_per_minute: int | None = None,
        refuse_parts: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        if embedding_dim < 1:
            raise ValueError("embedding_dim must be at least 1")
        if latency_s < 0:
            raise ValueError("latency_s must not be negative")
        self.default_reply = default_reply
        self.latency_s = latency_s
        self.embedding_dim = embedding_dim
        self.host = host
        self._requested_port = port
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._uses: list[int] = []
        self._calls: list[RecordedCall] = []
        self._failures: deque[tuple[int, float | None]] = deque()  # (status, retry_after)
        self._delays: deque[float] = deque()
        self._window: RequestWindow | None = None
        self._rejected = 0
        self._serial = 0
        self._refused = _refusals(refuse_parts)
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        for rule in rules:
            self.add_rule(rule)
        self.set_rate_limit(requests_per_minute)

    @classmethod
    def from_script(
        cls, source: str | Path | Mapping[str, Any] | Sequence[Any], **kwargs: Any
    ) -> ScriptedLLMServer:
        """A server whose rules (and optionally settings) come from a YAML/JSON file or dict.

        The script is a list of rules, or a mapping with ``rules`` and any of
        ``default_reply``, ``latency_s``, ``embedding_dim``, ``requests_per_minute``,
        ``refuse_parts``; keyword
        arguments win over the script's settings. Rule fields are those of :class:`Rule`
        (``usage`` included); tool calls are written as ``{name: ..., arguments: {...}}``.
        """
        script = load_script(source)
        rules = script.pop("rules")
        return cls(rules, **{**script, **kwargs})

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> ScriptedLLMServer:
        """Bind and serve in a daemon thread; returns self so ``server = X().start()`` works."""
        if self._httpd is not None:
            raise RuntimeError("the scripted LLM server is already running")
        self._stopping.clear()
        self._httpd = _HTTPServer((self.host, self._requested_port), self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"scripted-llm-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and drop open connections; requests still waiting give up. Idempotent."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        httpd.close_connections()
        if thread is not None:
            thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (only known once started, when the requested port was 0)."""
        if self._httpd is None:
            raise RuntimeError("the scripted LLM server is not running: call start() first")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """The URL to give an OpenAI client as ``base_url``: ``http://host:port/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    def __repr__(self) -> str:
        where = self.base_url if self._httpd is not None else "not running"
        return f"ScriptedLLMServer({len(self._rules)} rules, {where})"

    # -- scripting -------------------------------------------------------------------------

    def add_rule(self, rule: Rule) -> Rule:
        """Append a rule: it is tried after every rule already there."""
        if not isinstance(rule, Rule):
            raise TypeError(f"expected a Rule, got {type(rule).__name__}")
        with self._lock:
            self._rules.append(rule)
            self._uses.append(0)
        return rule

    @property
    def rules(self) -> list[Rule]:
        """A copy of the rules, in the order they are tried."""
        with self._lock:
            return list(self._rules)

    def fail_next(
        self, count: int = 1, status: int = 500, *, retry_after: float | None = None
    ) -> None:
        """Answer the next ``count`` requests (any endpoint) with this HTTP error status.

        The body is OpenAI's error shape, so clients raise their usual exception classes.
        ``retry_after`` (seconds) is sent as ``Retry-After``, whole seconds as an integer;
        without it a 429 carries ``Retry-After: 0``. Failures queue after those already pending.
        """
        if count < 1 or not 400 <= status <= 599:
            raise ValueError("fail_next needs count >= 1 and a 4xx or 5xx status")
        if retry_after is not None and not (math.isfinite(retry_after) and retry_after >= 0):
            raise ValueError(f"retry_after must be a finite number >= 0, got {retry_after!r}")
        with self._lock:
            self._failures.extend([(status, retry_after)] * count)

    def delay_next(self, count: int = 1, seconds: float = 5.0) -> None:
        """Hold the next ``count`` requests for ``seconds`` before answering them normally.

        Meant to provoke client timeouts; the wait ends early when the server stops.
        """
        if count < 1 or seconds < 0:
            raise ValueError("delay_next needs count >= 1 and seconds >= 0")
        with self._lock:
            self._delays.extend([seconds] * count)

    def set_rate_limit(self, requests_per_minute: int | None, *, window_s: float = 60.0) -> None:
        """Limit chat requests to ``requests_per_minute``, counted over a sliding window.

        A window shorter than a minute admits its share (``requests_per_minute * window_s /
        60``), which keeps tests fast. Only requests answered 200 count; one that would exceed
        the limit is answered 429 (recorded in :attr:`calls`) with ``Retry-After`` the seconds
        until the oldest counted request leaves the window. Embeddings and models are never
        limited. A new limit starts with an empty window; ``None`` lifts the limit.
        """
        window = None
        if requests_per_minute is not None:
            window = RequestWindow(requests_per_minute, window_s)
        with self._lock:
            self._window = window

    @property
    def requests_per_minute(self) -> int | None:
        """The rate limit on chat requests (None: no limit); see :meth:`set_rate_limit`."""
        with self._lock:
            return None if self._window is None else self._window.requests_per_minute

    def rejected_count(self) -> int:
        """How many requests the rate limit answered 429 (failures from :meth:`fail_next` aside)."""
        with self._lock:
            return self._rejected

    @property
    def calls(self) -> list[RecordedCall]:
        """A copy of every call answered so far, oldest first."""
        with self._lock:
            return list(self._calls)

    def call_count(self, endpoint: str | None = None) -> int:
        """How many calls were answered, on one endpoint or (``None``) on all of them."""
        if endpoint is not None and endpoint not in ("chat", "embeddings", "models"):
            raise ValueError(f"unknown endpoint {endpoint!r}: use chat, embeddings or models")
        with self._lock:
            return sum(endpoint is None or call.endpoint == endpoint for call in self._calls)

    def reset(self) -> None:
        """Forget calls, pending failures and delays; rules stay, their ``times`` restart.

        The rate limit stays too, with an empty window and :meth:`rejected_count` back at 0.
        """
        with self._lock:
            self._calls.clear()
            self._failures.clear()
            self._delays.clear()
            self._uses = [0] * len(self._rules)
            self._rejected = 0
            if self._window is not None:
                self._window.clear()

    # -- answering -------------------------------------------------------------------------

    def _respond(
        self, method: str, path: str, raw: bytes
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        """Status, JSON body and extra headers for one HTTP request."""
        route = path.split("?", 1)[0].rstrip("/")
        endpoint = _ROUTES.get((method, route))
        if endpoint is None:
            error = _ApiError(404, f"Unknown request URL: {method} {path}", code="unknown_url")
            return error.status, error.body, {}
        arrived = time.time()
        self._pause(self.latency_s)
        with self._lock:
            delay = self._delays.popleft() if self._delays else 0.0
            failure = self._failures.popleft() if self._failures else None
        self._pause(delay)

        request: dict[str, Any] = {}
        headers: dict[str, str] = {}
        unparsed: _ApiError | None = None
        if method == "POST":
            try:
                request = _parse_object(raw)
            except _ApiError as error:
                request, unparsed = {"_unparsed": raw.decode("utf-8", "replace")}, error
        admission: tuple[RequestWindow, float] | None = None
        try:
            if failure is not None:
                raise _injected_error(*failure)
            if unparsed is not None:
                raise unparsed
            if endpoint == "chat":
                admission = self._admit()
            status, body = 200, self._answer(endpoint, request)
        except _ApiError as error:
            status, body = error.status, error.body
            headers.update(error.headers)
        except Exception as error:  # a stand-in bug: say so to the client, not to stderr
            status = 500
            body = _ApiError(500, f"stand-in internal error: {error!r}", "server_error").body
        with self._lock:
            if admission is not None and status != 200:
                window, admitted_at = admission
                window.release(admitted_at)  # only successful answers use up the limit
            self._calls.append(RecordedCall(endpoint, request, status, body, arrived))
        return status, body, headers

    def _admit(self) -> tuple[RequestWindow, float] | None:
        """Count a chat request against the rate limit, or raise its 429.

        Returns the window and the time the request counted at, for :meth:`RequestWindow.release`
        if the answer fails; None when there is no limit.
        """
        with self._lock:
            window = self._window
            if window is None:
                return None
            now = time.monotonic()
            wait = window.admit(now)
            if wait is None:
                return window, now
            self._rejected += 1
        raise _rate_limited(window, wait)

    def _pause(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)

    def _answer(self, endpoint: Endpoint, request: dict[str, Any]) -> dict[str, Any]:
        if endpoint == "chat":
            return self._chat(request)
        if endpoint == "embeddings":
            return self._embeddings(request)
        return self._models()

    def _chat(self, request: dict[str, Any]) -> dict[str, Any]:
        _check_chat(request)
        messages = request["messages"]
        refused = self._refused.get(request["model"], self._refused.get("*"))
        try:
            check_parts(messages)
            refusal = refused_part(messages, refused) if refused else None
        except PartError as error:
            raise _ApiError(400, str(error), param=error.param) from None
        if refusal is not None:
            raise _ApiError(400, str(refusal), param=refusal.param)
        with self._lock:
            rule = self._take_rule(request)
            self._serial += 1
            serial = self._serial
            call_ids = []
            if rule is not None and rule.reply_tool_calls is not None:
                for _ in rule.reply_tool_calls:
                    self._serial += 1
                    call_ids.append(f"call_{self._serial}")

        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
        finish = "stop"
        if rule is None:
            if self.default_reply is None:
                last = message_text(messages[-1])[:200]
                raise _ApiError(400, f"no scripted rule matches this request (last: {last!r})")
            message["content"] = fill_placeholders(self.default_reply, messages)
        elif rule.reply_tool_calls is not None:
            message["tool_calls"] = [
                tool_call_json(spec, call_id)
                for spec, call_id in zip(rule.reply_tool_calls, call_ids, strict=True)
            ]
            finish = "tool_calls"
        elif rule.reply_json is not None:
            message["content"] = json.dumps(rule.reply_json)
        else:
            message["content"] = fill_placeholders(rule.reply_text or "", messages)

        if message["content"] is not None:
            completion = count_words(message["content"])
        else:
            completion = sum(
                count_words(f"{c['function']['name']} {c['function']['arguments']}")
                for c in message["tool_calls"]
            )
        usage = chat_usage(prompt_words(request), completion, None if rule is None else rule.usage)
        return {
            "id": f"chatcmpl-stand-in-{serial}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request["model"],
            "system_fingerprint": STAND_IN_FINGERPRINT,
            "choices": [
                {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
            ],
            "usage": usage,
        }

    def _take_rule(self, request: dict[str, Any]) -> Rule | None:
        """The first matching rule with uses left, counting the use (call with the lock held)."""
        for index, rule in enumerate(self._rules):
            if rule.times is not None and self._uses[index] >= rule.times:
                continue
            if rule.matches(request):
                self._uses[index] += 1
                return rule
        return None

    def _embeddings(self, request: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(request.get("model"), str):
            raise _ApiError(400, "'model' is required and must be a string")
        texts = request.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise _ApiError(
                400, "'input' must be a string or a non-empty list of strings (no token arrays)"
            )
        dim = request.get("dimensions") or self.embedding_dim
        if not isinstance(dim, int) or dim < 1:
            raise _ApiError(400, "'dimensions' must be a positive integer")
        encoding = request.get("encoding_format") or "float"
        if encoding not in ("float", "base64"):
            raise _ApiError(400, "'encoding_format' must be 'float' or 'base64'")
        data = []
        for index, text in enumerate(texts):
            vector: Any = embed(text, dim)
            if encoding == "base64":  # little-endian float32, as the openai client decodes it
                vector = base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode("ascii")
            data.append({"object": "embedding", "index": index, "embedding": vector})
        words = sum(count_words(text) for text in texts)
        return {
            "object": "list",
            "data": data,
            "model": request["model"],
            "usage": {"prompt_tokens": words, "total_tokens": words},
        }

    def _models(self) -> dict[str, Any]:
        with self._lock:
            named = [rule.model for rule in self._rules if rule.model is not None]
        return {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": 0, "owned_by": STAND_IN_OWNER}
                for name in dict.fromkeys([STAND_IN_MODEL, *named])
            ],
        }


def _refusals(
    refuse_parts: Sequence[str] | Mapping[str, Sequence[str]] | None,
) -> dict[str, frozenset[str]]:
    """``refuse_parts`` by model (``"*"``: any other), checked."""
    if refuse_parts is None:
        return {}
    if isinstance(refuse_parts, str) or not isinstance(refuse_parts, Mapping | Sequence):
        raise ValueError(f"refuse_parts must be a list or a mapping, got {refuse_parts!r}")
    if not isinstance(refuse_parts, Mapping):
        refuse_parts = {"*": refuse_parts}
    refusals = {}
    for model, kinds in refuse_parts.items():
        if isinstance(kinds, str) or not isinstance(kinds, Sequence):
            raise ValueError(f"refuse_parts[{model!r}] must be a list, got {kinds!r}")
        unknown = set(kinds) - set(REFUSABLE)
        if unknown:
            raise ValueError(
                f"refuse_parts: unknown part types {sorted(unknown)}; use {list(REFUSABLE)}"
            )
        refusals[str(model)] = frozenset(kinds)
    return refusals


def _parse_object(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise _ApiError(400, f"the request body is not valid JSON: {error}") from None
    if not isinstance(body, dict):
        raise _ApiError(400, "the request body must be a JSON object")
    return body


def _check_chat(request: dict[str, Any]) -> None:
    """Reject what the stand-in cannot answer faithfully, with OpenAI-style messages."""
    if not isinstance(request.get("model"), str):
        raise _ApiError(400, "'model' is required and must be a string")
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _ApiError(400, "'messages' is required and must be a non-empty list")
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        raise _ApiError(400, "every message must be an object with a string 'role'")
    if request.get("stream"):
        raise _ApiError(
            400, "stream=true is not supported by the scripted stand-in server: call without it"
        )
    if request.get("n") not in (None, 1):
        raise _ApiError(400, "the scripted stand-in server answers one choice only (n=1)")
    response_format = request.get("response_format")
    if response_format is not None and (
        not isinstance(response_format, dict)
        or response_format.get("type") not in _RESPONSE_FORMATS
    ):
        raise _ApiError(400, f"'response_format.type' must be one of {list(_RESPONSE_FORMATS)}")


class _HTTPServer(ThreadingHTTPServer):
    """Threaded, quiet, and able to drop its open keep-alive connections on stop."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], stand_in: ScriptedLLMServer) -> None:
        self.stand_in = stand_in
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._open_lock:
            sockets = list(self._open)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that time out hang up mid-answer on purpose; anything else is a real bug.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the openai client's connection pool expects
    server_version = "flink-agents-scripted-stand-in"
    # Headers and body go out in two writes: with Nagle's algorithm the body waits for the
    # client's delayed ACK of the headers, ~40 ms added to every answer on a kept-alive
    # connection (measured: 44 ms for an embedding with no configured latency).
    disable_nagle_algorithm = True
    server: _HTTPServer

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            error = _ApiError(400, "invalid Content-Length header")
            self._send(error.status, error.body, {})
            self.close_connection = True
            return
        raw = self.rfile.read(length) if length else b""
        self._send(*self.server.stand_in._respond(method, self.path, raw))

    def _send(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
        payload = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a test's stderr is for the code under test."""


def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    script: str | Path | None = None,
    latency_s: float | None = None,
    out: TextIO | None = None,
    requests_per_minute: int | None = None,
) -> int:
    """Run a stand-in until Ctrl-C or SIGTERM, announcing it as such (``flink-agents llm-server``).

    The first line printed is the banner with the base URL, so scripts can read it.
    ``latency_s`` and ``requests_per_minute``, when given, win over the script's settings.
    """
    out = out or sys.stdout
    settings: dict[str, Any] = {"host": host, "port": port}
    if latency_s is not None:
        settings["latency_s"] = latency_s
    if requests_per_minute is not None:
        settings["requests_per_minute"] = requests_per_minute
    if script:
        server = ScriptedLLMServer.from_script(script, **settings)
    else:
        server = ScriptedLLMServer(**settings)
    on_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if on_main else None
    rpm = server.requests_per_minute
    limit = "" if rpm is None else f"at most {rpm} chat requests a minute; "
    with server:
        print(
            f"TEST STAND-IN: scripted OpenAI-compatible server at {server.base_url}"
            " (not a real model)",
            file=out,
            flush=True,
        )
        print(
            f"{len(server.rules)} rules from {script or 'no script'}; {limit}"
            f"use OPENAI_BASE_URL={server.base_url} OPENAI_API_KEY=anything; Ctrl-C stops",
            file=out,
            flush=True,
        )
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
        finally:
            if on_main:
                signal.signal(signal.SIGTERM, previous)
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
