"""``MCPServer``: an MCP server as a resource whose tools are tools and prompts are prompts.

One instance per runner (per Flink subtask), like every resource: it connects on first use,
lists the server's tools and prompts once (then keeps the lists for the life of the
process), and sends every call through one persistent session on its private event loop
(``_session``). A session that ended (the server exited, the connection broke) is replaced
by a new connection on the next use, so the run that found the server dead fails and a
later run (or a retry) reaches it again once it is back.

Secrets: header values and environment values reach the connection and nothing else. The
plan holds what was given (environment references, see ``env_ref``); every error message is
masked with the values those resolved to, so a server echoing its token does not put it into
an error record.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, TextIO, TypeVar
from urllib.parse import urlsplit

import httpx2
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from pydantic import BaseModel, ConfigDict, PrivateAttr, model_validator

from flink_agents._ids import durable_name
from flink_agents.api import (
    ChatMessage,
    DocumentPart,
    FlinkAgentsError,
    ImagePart,
    MessageRole,
    Prompt,
    PromptFormatError,
    PromptSet,
    ResourceDescriptor,
    ResourceType,
    Tool,
    ToolSet,
    ToolSpec,
    ToolUnavailableError,
)
from flink_agents.api.internal import is_env_ref, strip_titles
from flink_agents.integrations.mcp._session import LoopThread, Session, SessionEnded, describe

logger = logging.getLogger(__name__)
T = TypeVar("T")

_ENV_IN_STRING = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_SECRET_NAME = re.compile(r"auth|token|secret|key|passw|cookie|credential|session", re.I)
_MASK = "***"
PROVIDER = "flink_agents.integrations.mcp:MCPServer"
"""The provider plans name (the package's facade, which outlives module moves)."""
_PAGES = 100
"""Pages of a tool or prompt listing read at most (a server that never ends its listing)."""
_CLOSE_S = 10.0
_BACKSTOP_S = 5.0
"""How long past the SDK's own timeouts the calling thread waits before giving up itself."""
_CONNECTION_CLOSED = -32000
"""The JSON-RPC code the SDK answers requests with when the connection closed."""
_INVALID_PARAMS = -32602
"""The JSON-RPC code of a request the server refuses as such (an unknown tool or prompt,
arguments it does not take): the caller's mistake, which the model can correct. Any other
JSON-RPC error (a terminated session, an internal error, an HTTP error status) means the
server cannot serve the session."""


class MCPServerError(ToolUnavailableError):
    """An MCP server cannot be reached: it did not start, it died, it stopped answering.

    The action that used it fails and the run's error policy decides what happens; the
    message names the server (its resource name and endpoint, never its secrets).
    """


class MCPToolError(FlinkAgentsError):
    """An MCP tool answered with an error (bad arguments, a failure inside the tool); the
    model is told, as with any tool that raises."""


class MCPServer(ToolSet, PromptSet):
    """An MCP server as a resource: over stdio (a command this process starts) or over
    streamable HTTP (a URL).

    Its tools are tools (``ReActAgent(tools=[server])``, or the server's resource name in a
    list of tool names, stands for all of them) and its prompts are prompts (``ctx.
    get_resource(prompt_name, ResourceType.PROMPT)``, ``ReActAgent(prompt=server.prompt(
    name))``). Calls are thread-safe, synchronous (``call_tool``, ``MCPTool.call``) or awaited
    from any event loop (``acall_tool``, ``MCPTool.acall``); the built-in tool action awaits
    them as durable calls on the runner's loop.

    Args:
        command: the program that starts a stdio server (e.g. ``python``, ``npx``).
        args: its arguments.
        env: environment variables for it (it inherits only ``PATH``, ``HOME`` and a few
            other safe ones); write secrets as ``env_ref("VAR")`` or ``"${env:VAR}"``.
        cwd: its working directory.
        url: the endpoint of a streamable HTTP server, e.g. ``http://127.0.0.1:8000/mcp``.
        headers: HTTP headers sent with every request; write secrets as ``env_ref``.
        timeout: seconds a request (a tool call, a listing) may take before the server
            counts as unreachable.
        connect_timeout: seconds connecting may take.
        name: the resource name (set by the runner; give it when the server goes into
            ``ReActAgent(tools=[...])``, which declares it under this name).

    Raises:
        FlinkAgentsError: neither or both of ``command`` and ``url``; a bad URL.
    """

    def __init__(
        self,
        command: str | None = None,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, Any] | None = None,
        cwd: str | None = None,
        url: str | None = None,
        headers: Mapping[str, Any] | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 30.0,
        name: str | None = None,
    ) -> None:
        if (command is None) == (url is None):
            raise FlinkAgentsError(
                "MCPServer needs either command= (a stdio server) or url= (a streamable HTTP "
                "server)"
            )
        if url is not None and not isinstance(url, dict):
            scheme = urlsplit(url).scheme
            if scheme not in ("http", "https") and not url.startswith("${env:"):
                raise FlinkAgentsError(f"MCPServer url must be http:// or https://, got {url!r}")
        if isinstance(args, str):
            raise FlinkAgentsError("MCPServer args is a list of arguments, not one string")
        if timeout <= 0 or connect_timeout <= 0:
            raise FlinkAgentsError("MCPServer timeouts must be positive")
        self.name = name
        self._given: dict[str, Any] = {
            "command": command,
            "args": list(args),
            "env": dict(env) if env else None,
            "cwd": cwd,
            "url": url,
            "headers": dict(headers) if headers else None,
            "timeout": timeout,
            "connect_timeout": connect_timeout,
        }
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.endpoint = _endpoint(command, url)
        self._lock = threading.Lock()
        self._lists_lock = threading.Lock()
        self._loop: LoopThread | None = None
        self._session: Session | None = None
        self._closing: list[concurrent.futures.Future[None]] = []
        self._secrets: list[str] = []
        self._tools: list[MCPTool] | None = None
        self._prompts: dict[str, MCPPrompt] | None = None

    # -- what it offers --------------------------------------------------------------------

    def list_tools(self) -> list[Tool]:
        """The server's tools, listed on first use and kept for the life of this resource.

        Raises:
            MCPServerError: the server cannot be reached.
        """
        with self._lists_lock:
            if self._tools is None:
                listed = self._list("tools", lambda c, cursor: c.list_tools(cursor=cursor))
                self._tools = [MCPTool(self, _tool_spec(t)) for t in listed]
            return list(self._tools)

    def list_prompts(self) -> list[str]:
        """The names of the server's prompts, listed on first use and then kept.

        Raises:
            MCPServerError: the server cannot be reached.
        """
        return list(self._prompt_index())

    def get_prompt(self, name: str) -> MCPPrompt | None:
        """The server's prompt ``name`` (rendered by the server when it is filled in)."""
        return self._prompt_index().get(name)

    # -- calls -----------------------------------------------------------------------------

    def call_tool(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """Call the tool ``name``: its text (its text blocks joined), else its structured
        content, else its content blocks as JSON.

        Raises:
            MCPToolError: the tool answered with an error, or the server refused the call.
            MCPServerError: the server cannot be reached.
        """
        what = f"tool call {name!r}"
        result = self._request(
            what, lambda c: c.call_tool(name, dict(arguments), read_timeout_seconds=self.timeout)
        )
        return self._tool_result(result)

    async def acall_tool(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """``call_tool`` for a caller on an event loop (the runner's loop of ``async def``
        calls): the request is awaited, so no thread waits for the server's answer.

        Raises:
            MCPToolError: the tool answered with an error, or the server refused the call.
            MCPServerError: the server cannot be reached.
        """
        what = f"tool call {name!r}"
        result = await self._arequest(
            what, lambda c: c.call_tool(name, dict(arguments), read_timeout_seconds=self.timeout)
        )
        return self._tool_result(result)

    def _tool_result(self, result: Any) -> Any:
        if result.is_error:
            text = _content_text(result.content) or "the tool reported an error"
            raise MCPToolError(self._mask(text))
        return _result_value(result)

    def render_prompt(self, name: str, arguments: Mapping[str, str]) -> list[ChatMessage]:
        """The messages of prompt ``name`` filled in by the server with ``arguments``.

        Raises:
            PromptFormatError: the server refused the arguments, or a message is not text.
            MCPServerError: the server cannot be reached.
        """
        what = f"prompt {name!r}"
        try:
            result = self._request(what, lambda c: c.get_prompt(name, dict(arguments)))
        except MCPToolError as refused:
            raise PromptFormatError(f"{self.label} refused {what}: {refused}") from None
        return [_prompt_message(self.label, name, m) for m in result.messages]

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def label(self) -> str:
        """How errors name it: ``MCP server 'name' (endpoint)``."""
        named = f" {self.name!r}" if self.name else ""
        return f"MCP server{named} ({self.endpoint})"

    def close(self) -> None:
        """End the session (a stdio server's process exits) and stop the event loop. The
        tool and prompt lists are kept; a later call connects again."""
        with self._lock:
            loop, session = self._loop, self._session
            closing, self._closing = self._closing, []
            self._loop = self._session = None
        if loop is None:
            return
        try:
            if session is not None:
                loop.run(session.close(_CLOSE_S), _CLOSE_S + 1)
            # Sessions dropped after a failure are still winding down (a stdio server
            # is given time to exit before it is killed): let them finish first.
            concurrent.futures.wait(closing, timeout=_CLOSE_S)
        except Exception as error:
            logger.warning("closing %s: %s", self.label, describe(error))
        finally:
            loop.stop()

    def descriptor(self) -> ResourceDescriptor:
        """How a plan recreates this server: the arguments as given, environment references
        unresolved.

        Raises:
            FlinkAgentsError: a header, environment value or URL password that looks like a
                secret was given as a literal value (use ``env_ref``).
        """
        for field in ("headers", "env"):
            for key, value in (self._given[field] or {}).items():
                if _SECRET_NAME.search(key) and not _from_env(value):
                    raise FlinkAgentsError(
                        f"{self.label}: {field[:-1] if field == 'headers' else field} {key!r} "
                        "given in code cannot be written into an agent plan: use "
                        f"env_ref('VAR') or '${{env:VAR}}' for its value"
                    )
        url = self._given["url"]
        if isinstance(url, str) and urlsplit(url).password and not _from_env(url):
            raise FlinkAgentsError(
                f"{self.label}: a password in the URL cannot be written into an agent plan: "
                "use '${env:VAR}' for it"
            )
        defaults = {"args": [], "env": None, "cwd": None, "command": None, "url": None}
        defaults |= {"headers": None, "timeout": 60.0, "connect_timeout": 30.0}
        args = {k: v for k, v in self._given.items() if v != defaults[k]}
        return ResourceDescriptor(PROVIDER, ResourceType.MCP_SERVER, **args)

    def __reduce__(self) -> tuple[Any, ...]:
        # A live session cannot be pickled: a copy connects again when used.
        return (_rebuild, (self._given, self.name))

    def __repr__(self) -> str:
        return f"MCPServer({self.name!r}, {self.endpoint})"

    # -- the session ----------------------------------------------------------------------

    def _prompt_index(self) -> dict[str, MCPPrompt]:
        with self._lists_lock:
            if self._prompts is None:
                listed = self._list("prompts", lambda c, cursor: c.list_prompts(cursor=cursor))
                self._prompts = {p.name: MCPPrompt.of(self, p) for p in listed}
            return self._prompts

    def _list(self, kind: str, page: Callable[[Any, str | None], Awaitable[Any]]) -> list[Any]:
        """Every page of the server's ``kind`` listing; none when it offers no ``kind``.

        Raises:
            MCPServerError: the server cannot be reached, or refused to list.
        """
        what = f"listing {kind}"
        items: list[Any] = []
        cursor: str | None = None
        try:
            if not self._request(what, lambda c: _offers(c, kind)):
                return []
            for _ in range(_PAGES):
                result = self._request(what, lambda c, at=cursor: page(c, at))
                items.extend(getattr(result, kind))
                cursor = result.next_cursor
                if cursor is None:
                    break
        except MCPToolError as refused:
            raise MCPServerError(f"{self.label} refused {what}: {refused}") from None
        return items

    def _request(self, what: str, call: Callable[[Any], Awaitable[T]]) -> T:
        """``call(client)`` on the current session (connecting first if there is none).

        Raises:
            MCPServerError: the server cannot be reached, or did not answer in time.
            MCPToolError: the server answered with a JSON-RPC error.
        """
        loop, session = self._connected()
        try:
            return loop.run(session.request(call, self.timeout), self.timeout + _BACKSTOP_S)
        except Exception as error:
            raise self._failed(what, error, loop, session) from None

    async def _arequest(self, what: str, call: Callable[[Any], Awaitable[T]]) -> T:
        """``_request`` awaited from another event loop. Connecting (rare: the first call,
        or after the session ended) blocks, so it runs on a thread of its own.

        Raises:
            MCPServerError: the server cannot be reached, or did not answer in time.
            MCPToolError: the server answered with a JSON-RPC error.
        """
        loop, session = self._live() or await asyncio.to_thread(self._connected)
        try:
            request = session.request(call, self.timeout)
            return await loop.arun(request, self.timeout + _BACKSTOP_S)
        except Exception as error:
            raise self._failed(what, error, loop, session) from None

    def _failed(
        self, what: str, error: Exception, loop: LoopThread, session: Session
    ) -> MCPToolError | MCPServerError:
        """What a failed request raises. A refused request leaves the session as it is;
        any other failure discards it: the next call connects again (a new process for a
        stdio server) and finds out whether the server is back."""
        failure: tuple[str, BaseException | None]
        if isinstance(error, MCPError):
            if error.code == _INVALID_PARAMS:  # an unknown tool, arguments it does not take
                return MCPToolError(self._mask(str(error)))
            lost = error.code == _CONNECTION_CLOSED
            failure = (f"lost the connection during {what}" if lost else f"failed {what}", error)
        elif isinstance(error, SessionEnded):
            failure = (f"lost the connection during {what}", error)
        elif isinstance(error, TimeoutError):
            failure = (f"did not answer {what} within {self.timeout:g}s", None)
        else:
            failure = (f"failed {what}", error)
        self._discard(loop, session)
        return self._unreachable(*failure)

    def _discard(self, loop: LoopThread, session: Session) -> None:
        with self._lock:
            if self._session is session:
                self._session = None
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile (close())
                closing = asyncio.run_coroutine_threadsafe(session.close(_CLOSE_S), loop.loop)
                self._closing = [f for f in self._closing if not f.done()] + [closing]

    def _live(self) -> tuple[LoopThread, Session] | None:
        """The current session, unless there is none or it ended."""
        with self._lock:
            return self._current()

    def _current(self) -> tuple[LoopThread, Session] | None:
        """``_live``, for a caller holding ``_lock``."""
        if self._session is None or self._session.ended:
            return None
        assert self._loop is not None
        return self._loop, self._session

    def _connected(self) -> tuple[LoopThread, Session]:
        """The current session, or a new one (connecting on this thread)."""
        with self._lock:
            current = self._current()
            if current is not None:
                return current
            try:
                connector = self._connector()
            except FlinkAgentsError as error:  # an environment variable that is not set
                raise self._unreachable("cannot connect", error) from None
            if self._loop is None:
                self._loop = LoopThread(f"mcp-{self.name or 'server'}")
            session = Session(connector)
            try:
                self._loop.run(session.open(), self.connect_timeout)
            except TimeoutError:  # the session stops connecting (and its server) by itself
                raise self._unreachable(
                    f"did not connect within {self.connect_timeout:g}s", None
                ) from None
            except SessionEnded as failed:
                raise self._unreachable("cannot connect", failed) from None
            self._session = session
            return self._loop, session

    def _connector(self) -> Callable[[], AbstractAsyncContextManager[Any]]:
        """Resolves environment references (the runner has already resolved those of a
        plan; an instance made in code resolves its own) and returns how to connect."""
        secrets: list[str] = []
        given = {k: _resolve(v, secrets) for k, v in self._given.items()}
        for field in ("headers", "env"):
            secrets.extend(str(v) for v in (given[field] or {}).values())
        if given["url"] and urlsplit(given["url"]).password:
            secrets.append(urlsplit(given["url"]).password)
        self._secrets = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)
        if given["url"]:
            return _http_connector(given["url"], given["headers"], self.connect_timeout)
        stdio = (given["command"], given["args"], given["env"], given["cwd"])
        return _stdio_connector(*stdio, self.connect_timeout)

    def _unreachable(self, what: str, cause: BaseException | None) -> MCPServerError:
        detail = f": {describe(cause)}" if cause is not None else ""
        return MCPServerError(self._mask(f"{self.label} {what}{detail}"))

    def _mask(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, _MASK)
        return text


class MCPTool(Tool):
    """A tool of an MCP server: the name, description and input schema the server lists,
    called through the server's session."""

    def __init__(self, server: MCPServer, spec: ToolSpec) -> None:
        self.server = server
        self._metadata = spec

    @property
    def metadata(self) -> ToolSpec:
        return self._metadata

    @durable_name("flink_agents.integrations.mcp._server:MCPTool.call")
    def call(self, arguments: Mapping[str, Any]) -> Any:
        """Call the tool on its server.

        Raises:
            MCPToolError: the tool answered with an error (the model is told).
            MCPServerError: the server cannot be reached (the action fails).
        """
        return self.server.call_tool(self._metadata.name, arguments)

    @durable_name("flink_agents.integrations.mcp._server:MCPTool.acall")
    async def acall(self, arguments: Mapping[str, Any]) -> Any:
        """``call``, awaited: the built-in tool action awaits it on the runner's event loop,
        so a call in flight holds no thread of the pool.

        Raises:
            MCPToolError: the tool answered with an error (the model is told).
            MCPServerError: the server cannot be reached (the action fails).
        """
        return await self.server.acall_tool(self._metadata.name, arguments)

    def __repr__(self) -> str:
        return f"MCPTool({self._metadata.name!r}, {self.server!r})"


class MCPPrompt(Prompt):
    """A prompt of an MCP server: filling it in asks the server to render it.

    Its variables are the prompt's arguments; ``format_messages`` passes those given (as
    text: MCP prompt arguments are strings) and ignores the rest, so a ReAct agent can hand
    it all of a record's fields. The messages keep the roles the server gives them.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    arguments: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    _server: MCPServer | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check(self) -> MCPPrompt:  # replaces Prompt's: the server holds the template
        return self

    @classmethod
    def of(cls, server: MCPServer, listed: Any) -> MCPPrompt:
        arguments = listed.arguments or []
        prompt = cls(
            name=listed.name,
            description=listed.description or "",
            arguments=tuple(a.name for a in arguments),
            required=tuple(a.name for a in arguments if a.required),
        )
        prompt._server = server
        return prompt

    @property
    def variables(self) -> list[str]:
        return list(self.arguments)

    def format(self, **variables: Any) -> str:
        return "\n".join(m.text for m in self.format_messages(**variables))

    def format_messages(
        self, role: MessageRole = MessageRole.USER, **variables: Any
    ) -> list[ChatMessage]:
        """The server's messages for ``variables`` (``role`` is unused: each message has
        the role the server gives it).

        Raises:
            PromptFormatError: a required argument is missing, or the server refused.
            MCPServerError: the server cannot be reached.
        """
        if self._server is None:
            raise FlinkAgentsError(f"MCP prompt {self.name!r} is not bound to its server")
        missing = [a for a in self.required if variables.get(a) is None]
        if missing:
            given = ", ".join(sorted(variables)) or "none"
            raise PromptFormatError(
                f"prompt variable {missing[0]!r} was not given (MCP prompt {self.name!r} of "
                f"{self._server.label} takes {', '.join(self.arguments)}; given: {given})"
            )
        arguments = {
            a: _as_text(variables[a]) for a in self.arguments if variables.get(a) is not None
        }
        return self._server.render_prompt(self.name, arguments)

    def descriptor(self) -> ResourceDescriptor:
        raise FlinkAgentsError(
            f"MCP prompt {self.name!r} comes from its server: declare the server and use "
            f"server.prompt({self.name!r})"
        )


# --- connecting ---------------------------------------------------------------------------


def _stdio_connector(
    command: str,
    args: list[str],
    env: Mapping[str, str] | None,
    cwd: str | None,
    connect_timeout: float,
) -> Callable[[], AbstractAsyncContextManager[Any]]:
    params = StdioServerParameters(
        command=command, args=list(args), env=dict(env) if env else None, cwd=cwd
    )
    # read_timeout_seconds bounds the handshake's and the listings' requests; tool calls
    # pass their own.
    return lambda: Client(
        stdio_client(params, errlog=_server_stderr()),
        cache=None,
        read_timeout_seconds=connect_timeout,
    )


def _server_stderr() -> TextIO:
    """Where a stdio server's stderr goes: ours when it is a real file, else the process's
    own (PyFlink's workers replace ``sys.stderr`` with an object that has no file
    descriptor, which a child process cannot inherit), else nowhere."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None and stream.fileno() >= 0:
                return stream
        except (AttributeError, OSError, ValueError):
            continue
    return open(os.devnull, "w")  # left open: the server may write to it until it exits


def _http_connector(
    url: str, headers: Mapping[str, str] | None, connect_timeout: float
) -> Callable[[], AbstractAsyncContextManager[Any]]:
    @asynccontextmanager
    async def connect() -> Any:
        # Reads wait as long as a tool may run; the request itself is bounded by `timeout`.
        limits = httpx2.Timeout(connect_timeout, read=None)
        async with httpx2.AsyncClient(headers=dict(headers or {}), timeout=limits) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(
                transport, cache=None, read_timeout_seconds=connect_timeout
            ) as client:
                yield client

    return connect


# --- conversions --------------------------------------------------------------------------


async def _offers(client: Any, kind: str) -> bool:
    """Whether the server declared the ``tools`` or ``prompts`` capability."""
    return getattr(client.server_capabilities, kind, None) is not None


def _tool_spec(listed: Any) -> ToolSpec:
    """The MCP tool as our tools describe themselves to a model (titles dropped, as for
    ``FunctionTool``)."""
    parameters = strip_titles(dict(listed.input_schema or {}))
    parameters.setdefault("type", "object")
    parameters.setdefault("properties", {})
    return ToolSpec(name=listed.name, description=listed.description or "", parameters=parameters)


def _content_text(content: Sequence[Any]) -> str:
    return "\n".join(block.text for block in content if getattr(block, "type", None) == "text")


def _result_value(result: Any) -> Any:
    content = list(result.content or [])
    if content and all(getattr(block, "type", None) == "text" for block in content):
        return _content_text(content)
    if result.structured_content is not None:
        return result.structured_content
    return [block.model_dump(mode="json", exclude_none=True, by_alias=True) for block in content]


def _prompt_message(label: str, prompt: str, message: Any) -> ChatMessage:
    content = message.content
    kind = getattr(content, "type", None)
    resource = getattr(content, "resource", None)
    if kind == "text":
        body: Any = content.text
    elif kind == "resource" and isinstance(getattr(resource, "text", None), str):
        body = resource.text
    elif kind == "image":  # its data is base64 text, which a part reads as the bytes
        body = [ImagePart(data=content.data, mime_type=content.mimeType)]
    elif kind == "resource" and isinstance(getattr(resource, "blob", None), str):
        name = str(resource.uri).rstrip("/").rpartition("/")[2] or None
        body = [DocumentPart(data=resource.blob, mime_type=resource.mimeType, name=name)]
    else:
        raise PromptFormatError(
            f"{label} prompt {prompt!r} has a {kind} message; chat messages carry text, "
            "images and documents"
        )
    return ChatMessage(role=MessageRole(message.role), content=body)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, default=str, ensure_ascii=False)


# --- plans and secrets --------------------------------------------------------------------


def _endpoint(command: Any, url: Any) -> str:
    """What errors show of where the server is: a URL without credentials or query, or the
    stdio program (not its arguments, which may carry secrets)."""
    if url is not None:
        if not isinstance(url, str) or url.startswith("${env:"):
            return "streamable HTTP, URL from the environment"
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"
    if not isinstance(command, str) or "${env:" in command:
        return "stdio, command from the environment"
    return f"stdio: {os.path.basename(command)}"


def _from_env(value: Any) -> bool:
    return is_env_ref(value) or (isinstance(value, str) and "${env:" in value)


def _resolve(value: Any, secrets: list[str]) -> Any:
    """``value`` with environment references resolved (their values go to ``secrets``).

    Raises:
        FlinkAgentsError: a referenced variable is not set.
    """
    if is_env_ref(value):
        return _lookup(value["env"], secrets)
    if isinstance(value, str):
        return _ENV_IN_STRING.sub(lambda m: _lookup(m.group(1), secrets), value)
    if isinstance(value, dict):
        return {k: _resolve(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, secrets) for v in value]
    return value


def _lookup(variable: str, secrets: list[str]) -> str:
    found = os.environ.get(variable)
    if found is None:
        raise FlinkAgentsError(f"MCPServer: environment variable {variable} is not set")
    secrets.append(found)
    return found


def _rebuild(given: dict[str, Any], name: str | None) -> MCPServer:
    args = dict(given)
    command, argv = args.pop("command"), args.pop("args")
    return MCPServer(command, argv, name=name, **args)
