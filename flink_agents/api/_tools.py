"""Tools: Python functions a model can call, with the JSON schema taken from their signature.

``Tool.from_function(fn)`` (or ``@tool``) reads the parameters' type hints and the Google-style
docstring (summary and ``Args:`` section) into the schema the model sees; calls validate the
model's arguments against the same pydantic model before running the function.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, TypeVar
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from flink_agents._ids import durable_name
from flink_agents.api._chat import ToolCall
from flink_agents.api._errors import FlinkAgentsError
from flink_agents.api._events import Event
from flink_agents.api._refs import import_ref, ref_of
from flink_agents.api._resources import ResourceDescriptor, ResourceType

F = TypeVar("F")

TOOL_ATTR = "__flink_agents_tool__"
"""Set by ``@tool`` on a function: its name and description overrides."""

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Returns|Return|Yields|Raises|Examples?|Notes?|"
    r"Attributes|See Also|Warnings?):\s*$"
)
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?::.*)?$")
_UNDERLINE = re.compile(r"^-{3,}$")


def awaited(result: Any) -> Any:
    """``result``, or if it is a coroutine (an ``async def`` function's, an async client's
    method's) its value: run to its end on an event loop of its own, on this thread, or on
    a thread of its own where this one runs a loop already (a notebook), since a loop
    cannot be started inside another. For tools and durable calls."""
    if not inspect.iscoroutine(result):
        return result
    import asyncio  # here, not at the top: it slows a Flink operator's start (bench/RESULTS.md)

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # the usual case: no loop runs on this thread
        return asyncio.run(result)
    with ThreadPoolExecutor(1, thread_name_prefix="coroutine-loop") as pool:
        return pool.submit(asyncio.run, result).result()


class ToolArgumentsError(FlinkAgentsError, ValueError):
    """A model called a tool with arguments that do not match its schema."""


class ToolUnavailableError(FlinkAgentsError):
    """A tool cannot be reached at all (an MCP server that died, never started, or stopped
    answering).

    A tool that fails on its arguments is an error result the model is told about, so it
    may try again; this one fails the action instead, and the run's error policy decides
    (retry, the error output, or failing the job). The message names what was unreachable.
    """


class ToolSpec(BaseModel):
    """What a model is told about a tool: its name, purpose and JSON-schema parameters."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class Tool(ABC):
    """A tool resource. Subclass it for tools that are not plain functions.

    Tools are created once per runner and called from the async executor's threads, so
    ``call`` must be thread-safe. The built-in tool action calls it through durable
    execution: a recovered job reuses recorded results instead of calling again.

    A tool may also have ``acall``: ``call`` as an ``async def`` method. The built-in tool
    action then awaits it on the engine's event loop instead of calling ``call`` on a
    thread of the pool (a ``FunctionTool`` of an ``async def`` function has one).
    """

    acall: Callable[[Mapping[str, Any]], Awaitable[Any]] | None = None
    """The async variant of ``call`` (same argument, same result), or None."""

    @property
    @abstractmethod
    def metadata(self) -> ToolSpec:
        """The tool's name, description and parameter schema."""

    @abstractmethod
    def call(self, arguments: Mapping[str, Any]) -> Any:
        """Run the tool with the model's ``arguments`` (a JSON object) and return its result.

        Raises:
            ToolArgumentsError: the arguments do not match the tool's parameters.
        """

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> FunctionTool:
        """A tool that calls ``function``; see ``FunctionTool``."""
        return FunctionTool(function, name=name, description=description)

    @classmethod
    def from_ref(
        cls, function: str, name: str | None = None, description: str | None = None
    ) -> FunctionTool:
        """The provider plans use: a tool from the function named ``module:qualname``."""
        target = import_ref(function)
        if isinstance(target, FunctionTool):
            target = target.function
        return FunctionTool(target, name=name, description=description)


class ToolSet(ABC):
    """A resource that offers several tools under their own names (an MCP server).

    A list of tool names (``ReActAgent(tools=...)``, ``ChatRequestEvent.tools``, a chat
    model's ``tools``) may name a tool set's resource: it stands for all of its tools. The
    tool action, and ``ctx.get_resource(name, ResourceType.TOOL)``, find each of them by
    the name the model calls it by when no resource of that name is declared.

    Attributes:
        name: the resource name it is declared under (the runner sets it on creation).
    """

    name: str | None = None

    @abstractmethod
    def list_tools(self) -> list[Tool]:
        """Its tools (listed once, then cached).

        Raises:
            ToolUnavailableError: the tools cannot be listed.
        """

    def get_tool(self, name: str) -> Tool | None:
        """Its tool called ``name``, if it has one."""
        return next((t for t in self.list_tools() if t.metadata.name == name), None)


class FunctionTool(Tool):
    """A plain Python function as a tool.

    The parameters' schema comes from the type hints (unannotated means any JSON value),
    defaults make a parameter optional, and each parameter's description comes from the
    docstring's ``Args:`` section. The tool's description is the docstring's text before
    its first section. ``*args`` and ``**kwargs`` are not supported: a model can only pass
    named arguments.

    Args:
        function: the function. An ``async def`` one is awaited by ``acall`` (on the
            engine's event loop, from the built-in tool action); ``call`` runs it to its
            end on the caller's thread.
        name: overrides the function's name (and ``@tool(name=...)``).
        description: overrides the docstring's description.
    """

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        if not callable(function):
            raise TypeError(f"a tool wraps a function, got {function!r}")
        function = getattr(function, "__func__", function)  # a staticmethod object
        marked = getattr(function, TOOL_ATTR, {})
        self.function = function
        self._name_override = name
        self._description_override = description
        doc_description, arg_docs = parse_docstring(inspect.getdoc(function) or "")
        tool_name = name or marked.get("name") or function.__name__
        self._args_model, self._positional = _arguments_model(function, tool_name, arg_docs)
        parameters = strip_titles(self._args_model.model_json_schema())
        parameters.setdefault("properties", {})
        self._metadata = ToolSpec(
            name=tool_name,
            description=description or marked.get("description") or doc_description,
            parameters=parameters,
        )
        if inspect.iscoroutinefunction(function):
            self.acall = self._acall

    @property
    def metadata(self) -> ToolSpec:
        return self._metadata

    @durable_name("flink_agents.api._tools:FunctionTool.call")
    def call(self, arguments: Mapping[str, Any]) -> Any:
        args, values = self._bind(arguments)
        return awaited(self.function(*args, **values))

    @durable_name("flink_agents.api._tools:FunctionTool._acall")
    async def _acall(self, arguments: Mapping[str, Any]) -> Any:
        args, values = self._bind(arguments)
        return await self.function(*args, **values)

    def _bind(self, arguments: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """The function's positional and keyword arguments from the model's ``arguments``.

        Raises:
            ToolArgumentsError: they are not a JSON object, or do not match the parameters.
        """
        if not isinstance(arguments, Mapping):
            raise ToolArgumentsError(
                f"tool {self._metadata.name!r} takes a JSON object of arguments, got "
                f"{_shorten(arguments)}"
            )
        try:
            validated = self._args_model.model_validate(dict(arguments))
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in error.errors()
            )
            raise ToolArgumentsError(
                f"tool {self._metadata.name!r} got invalid arguments: {problems}"
            ) from None
        values = {field: getattr(validated, field) for field in type(validated).model_fields}
        args = [values.pop(field) for field in self._positional]
        return args, values

    @property
    def func(self) -> Callable[..., Any]:
        """``function``, by Apache Flink Agents' name."""
        return self.function

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function directly, as if it were not a tool."""
        return self.function(*args, **kwargs)

    def descriptor(self) -> ResourceDescriptor:
        """How a plan recreates this tool (the function must be defined at module level)."""
        args: dict[str, Any] = {"function": ref_of(self.function)}
        if self._name_override:
            args["name"] = self._name_override
        if self._description_override:
            args["description"] = self._description_override
        return ResourceDescriptor(Tool.from_ref, ResourceType.TOOL, **args)

    def __reduce__(self) -> tuple[Any, ...]:
        # The generated arguments model cannot be pickled by reference: rebuild instead.
        return (
            _rebuild_function_tool,
            (self.function, self._name_override, self._description_override),
        )

    def __repr__(self) -> str:
        return f"FunctionTool({self._metadata.name!r})"


def _rebuild_function_tool(
    function: Callable[..., Any], name: str | None, description: str | None
) -> FunctionTool:
    return FunctionTool(function, name=name, description=description)


def tool(
    function: F | None = None, *, name: str | None = None, description: str | None = None
) -> Any:
    """Mark a function as a tool: ``@tool`` or ``@tool(name=..., description=...)``.

    The function stays a plain function (still callable, still named by its module and
    qualified name). Inside an ``Agent`` class (above or below ``@staticmethod``) it
    declares a tool resource named after the method; elsewhere pass it to
    ``Tool.from_function`` or ``ReActAgent(tools=[...])``.
    """

    def mark(member: F) -> F:
        target = getattr(member, "__func__", member)
        if not callable(target):
            raise TypeError(f"@tool decorates a function, got {member!r}")
        overrides = {k: v for k, v in (("name", name), ("description", description)) if v}
        setattr(target, TOOL_ATTR, overrides)
        return member

    return mark(function) if function is not None else mark


# --- events -------------------------------------------------------------------------------


class ToolResult(BaseModel):
    """The outcome of one tool call: its result, or the error the model is told about."""

    tool_call_id: str
    name: str
    content: Any = None
    error: str | None = None

    def text(self) -> str:
        """The result as the text of a ``tool`` message."""
        if self.error is not None:
            return f"Error: {self.error}"
        if isinstance(self.content, str):
            return self.content
        if isinstance(self.content, BaseModel):
            return self.content.model_dump_json()
        return json.dumps(self.content, default=str, ensure_ascii=False)


class ToolRequestEvent(Event):
    """Run ``tool_calls`` (each names a ``tool`` resource); answered by a
    ``ToolResponseEvent`` whose ``request_id`` is this event's ``id``.

    Attributes:
        model: the chat model resource that asked, if any.
        tool_calls: the calls to make, in order.
    """

    EVENT_TYPE: ClassVar[str | None] = "_tool_request_event"

    model: str | None = None
    tool_calls: list[ToolCall]


class ToolResponseEvent(Event):
    """The results of a ``ToolRequestEvent``, in the order of its calls.

    A call that failed (unknown tool, bad arguments, the tool raised) has ``error`` set and
    the run goes on, so a model can correct itself.
    """

    EVENT_TYPE: ClassVar[str | None] = "_tool_response_event"

    request_id: UUID
    results: list[ToolResult]


# --- schema from a signature --------------------------------------------------------------


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """A docstring's description (text before the first section) and the descriptions of
    its parameters (continuation lines joined), Google style (``Args:``, ``name: text``)
    or numpydoc style (``Parameters`` underlined with dashes, ``name : type`` and the text
    indented below, as Apache Flink Agents' tools are documented)."""
    description: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    numpy = False
    current: str | None = None
    arg_indent: int | None = None
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        header = _SECTION.match(stripped)
        underlined = i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1].strip())
        if indent == 0 and (header or (underlined and _SECTION.match(f"{stripped}:"))):
            section = header.group(1) if header else stripped
            numpy = not header
            current, arg_indent = None, None
            continue
        if section is None:
            description.append(stripped)
            continue
        if section not in ("Args", "Arguments", "Parameters") or not stripped:
            continue
        if numpy and _UNDERLINE.match(stripped):
            continue
        entry = (_NUMPY_ARG_LINE if numpy else _ARG_LINE).match(stripped)
        if entry and (arg_indent is None or indent <= arg_indent):
            arg_indent = indent
            current = entry.group(1).lstrip("*")
            args[current] = "" if numpy else entry.group(2).strip()
        elif current is not None:
            args[current] = f"{args[current]} {stripped}".strip()
    text = "\n".join(description).strip()
    return re.sub(r"\n{3,}", "\n\n", text), args


def _arguments_model(
    function: Callable[..., Any], tool_name: str, arg_docs: Mapping[str, str]
) -> tuple[type[BaseModel], list[str]]:
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except Exception as error:
        raise FlinkAgentsError(
            f"tool {tool_name!r}: cannot resolve the type hints of {function!r}: {error}"
        ) from error
    fields: dict[str, Any] = {}
    positional: list[str] = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise FlinkAgentsError(
                f"tool {tool_name!r}: *args and **kwargs cannot be described to a model; "
                "give every parameter a name"
            )
        if parameter.kind is parameter.POSITIONAL_ONLY:
            positional.append(parameter.name)
        default = ... if parameter.default is parameter.empty else parameter.default
        info = Field(default=default, description=arg_docs.get(parameter.name))
        fields[parameter.name] = (hints.get(parameter.name, Any), info)
    model_name = re.sub(r"\W", "_", f"{tool_name}_arguments")
    try:
        model = create_model(model_name, __config__=ConfigDict(extra="forbid"), **fields)
        model.model_json_schema()
    except Exception as error:
        raise FlinkAgentsError(
            f"tool {tool_name!r}: its parameters cannot be described as JSON schema: {error}"
        ) from error
    return model, positional


_DATA_KEYS = frozenset({"default", "examples", "const", "enum"})
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})


def strip_titles(schema: Any) -> Any:
    """The schema without pydantic's generated ``title``s (noise in a model's prompt)."""
    if isinstance(schema, list):
        return [strip_titles(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    cleaned: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key in _DATA_KEYS:
            cleaned[key] = value
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            cleaned[key] = {name: strip_titles(sub) for name, sub in value.items()}
        else:
            cleaned[key] = strip_titles(value)
    return cleaned


def _shorten(value: Any, limit: int = 200) -> str:
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."
