"""Resources declared the way Apache Flink Agents declares them, created by our integrations.

There, a resource is a class named by its dotted path (``ResourceDescriptor(clazz=...)``)
and built with keyword arguments; a chat model is two resources, a *connection* (where the
provider is, its credentials) and a *setup* (the model, its prompt, its tools, sampling
parameters) that names its connection. Here both become our resources: a connection holds
its arguments, and a setup is a ``BaseChatModel`` that answers through an
``OpenAIChatModel`` made from its connection's arguments and its own. So the chat action,
durable execution, retries, rate limits, budgets and tracing treat it as any model of ours.

Their class paths (``ResourceName``'s constants) are looked up in ``PROVIDERS``; any other
path is imported and called with the arguments (a user's own resource class, or one of
ours). Providers we do not carry fail with an error naming what to use instead. A chat or
embedding model setup the user wrote their way (``BaseChatModelSetup``) is answered through
``ResourceChatModel`` (``ResourceEmbeddingModel``), a model of ours over it.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from flink_agents._ids import durable_name
from flink_agents.api import (
    BaseChatModel,
    BaseEmbeddingModel,
    ChatMessage,
    ChatResponse,
    FlinkAgentsError,
    Prompt,
    ResourceType,
    Tool,
    ToolSpec,
)
from flink_agents.api.chat_models.chat_model import behind_prompt
from flink_agents.api.internal import OutputSchema, import_ref
from flink_agents.api.skills import LOAD_SKILL_TOOL as LOAD_SKILL
from flink_agents.api.skills import READ_SKILL_FILE_TOOL as READ_SKILL_FILE

ResourceLookup = Callable[[str, ResourceType], Any]

_CHAT = "flink_agents.integrations.chat_models."
_EMBEDDING = "flink_agents.integrations.embedding_models."
OLLAMA_URL = "http://localhost:11434"
OPENAI_URL = "https://api.openai.com/v1"
NO_KEY = "unused"
"""The API key sent to an endpoint that takes none (Ollama): the client needs one."""

_THINKING = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)


class UnsupportedResourceError(FlinkAgentsError):
    """A resource class of Apache Flink Agents this package has no counterpart for."""


class _Unsupported:
    """The provider of a resource class we do not carry: creating it fails, naming what to
    use instead."""

    def __init__(self, what: str, instead: str) -> None:
        self.message = f"{what} is not supported here: {instead}"

    def __call__(self, **_: Any) -> Any:
        raise UnsupportedResourceError(self.message)


def _unsupported(what: str, instead: str) -> _Unsupported:
    return _Unsupported(what, instead)


_JAVA = (
    "Java resources need Apache Flink Agents' Java runtime, which this package does not "
    "have (docs/migrating.md, 'Java and cross-language agents')"
)
_ANTHROPIC = (
    "use OPENAI_CONNECTION with api_base_url='https://api.anthropic.com/v1/' (Anthropic's "
    "OpenAI-compatible endpoint) or an OpenAI-compatible gateway such as LiteLLM"
)
_AZURE = (
    "use OPENAI_CONNECTION with the deployment's OpenAI-compatible base URL "
    "(https://<resource>.openai.azure.com/openai/v1/) or an OpenAI-compatible gateway"
)
_TONGYI = (
    "use OPENAI_CONNECTION with api_base_url="
    "'https://dashscope.aliyuncs.com/compatible-mode/v1' (DashScope's OpenAI-compatible mode)"
)


def _connection(kind: str) -> Callable[..., ChatModelConnection]:
    def create(**arguments: Any) -> ChatModelConnection:
        return ChatModelConnection(kind, **arguments)

    return create


def _embedding_connection(kind: str) -> Callable[..., EmbeddingModelConnection]:
    def create(**arguments: Any) -> EmbeddingModelConnection:
        return EmbeddingModelConnection(kind, **arguments)

    return create


PROVIDERS: dict[str, tuple[ResourceType, Callable[..., Any]]] = {
    _CHAT + "ollama_chat_model.OllamaChatModelConnection": (
        ResourceType.CHAT_MODEL_CONNECTION,
        _connection("ollama"),
    ),
    _CHAT + "openai.openai_chat_model.OpenAIChatModelConnection": (
        ResourceType.CHAT_MODEL_CONNECTION,
        _connection("openai"),
    ),
    _CHAT + "ollama_chat_model.OllamaChatModelSetup": (
        ResourceType.CHAT_MODEL,
        lambda **a: ChatModelSetup(**a),
    ),
    _CHAT + "openai.openai_chat_model.OpenAIChatModelSetup": (
        ResourceType.CHAT_MODEL,
        lambda **a: ChatModelSetup(**a),
    ),
    _CHAT + "anthropic.anthropic_chat_model.AnthropicChatModelConnection": (
        ResourceType.CHAT_MODEL_CONNECTION,
        _unsupported("Anthropic's own API", _ANTHROPIC),
    ),
    _CHAT + "anthropic.anthropic_chat_model.AnthropicChatModelSetup": (
        ResourceType.CHAT_MODEL,
        _unsupported("Anthropic's own API", _ANTHROPIC),
    ),
    _CHAT + "azure.azure_openai_chat_model.AzureOpenAIChatModelConnection": (
        ResourceType.CHAT_MODEL_CONNECTION,
        _unsupported("Azure OpenAI's own API", _AZURE),
    ),
    _CHAT + "azure.azure_openai_chat_model.AzureOpenAIChatModelSetup": (
        ResourceType.CHAT_MODEL,
        _unsupported("Azure OpenAI's own API", _AZURE),
    ),
    _CHAT + "tongyi_chat_model.TongyiChatModelConnection": (
        ResourceType.CHAT_MODEL_CONNECTION,
        _unsupported("Tongyi's own API", _TONGYI),
    ),
    _CHAT + "tongyi_chat_model.TongyiChatModelSetup": (
        ResourceType.CHAT_MODEL,
        _unsupported("Tongyi's own API", _TONGYI),
    ),
    _EMBEDDING + "local.ollama_embedding_model.OllamaEmbeddingModelConnection": (
        ResourceType.EMBEDDING_MODEL_CONNECTION,
        _embedding_connection("ollama"),
    ),
    _EMBEDDING + "openai_embedding_model.OpenAIEmbeddingModelConnection": (
        ResourceType.EMBEDDING_MODEL_CONNECTION,
        _embedding_connection("openai"),
    ),
    _EMBEDDING + "local.ollama_embedding_model.OllamaEmbeddingModelSetup": (
        ResourceType.EMBEDDING_MODEL,
        lambda **a: EmbeddingModelSetup(**a),
    ),
    _EMBEDDING + "openai_embedding_model.OpenAIEmbeddingModelSetup": (
        ResourceType.EMBEDDING_MODEL,
        lambda **a: EmbeddingModelSetup(**a),
    ),
    "flink_agents.integrations.vector_stores.chroma.chroma_vector_store.ChromaVectorStore": (
        ResourceType.VECTOR_STORE,
        _unsupported(
            "Chroma",
            "use the Qdrant vector store (flink_agents.integrations.vector_stores, embedded "
            "by default; docs/rag.md)",
        ),
    ),
    "flink_agents.integrations.mcp.mcp.MCPServer": (
        ResourceType.MCP_SERVER,
        lambda endpoint, **a: _mcp_server(endpoint, **a),
    ),
}
"""Apache Flink Agents' resource classes (the paths ``ResourceName`` spells), by path: the
resource type each declares and what creates ours from its arguments."""


def _mcp_server(endpoint: str, **arguments: Any) -> Any:
    from flink_agents.integrations.mcp import MCPServer

    return MCPServer(url=endpoint, **arguments)


def resource_type_of(clazz: str) -> ResourceType | None:
    """The resource type a class path declares, when it is one we know."""
    known = PROVIDERS.get(clazz)
    if known is not None:
        return known[0]
    if clazz.startswith("org.apache.flink.") or ".java_" in clazz:
        return None
    target = _import_class(clazz, strict=False)
    declared = getattr(target, "resource_type", None)
    if callable(declared):
        try:
            return ResourceType(declared())
        except (TypeError, ValueError):
            return None
    return None


def check_class(clazz: str) -> None:
    """Fail now, in the client, for a class we can never create (a Java one, an unknown
    path), rather than in a Flink worker at the first record.

    Raises:
        UnsupportedResourceError: a Java class or a provider we do not carry.
        FlinkAgentsError: the path imports nothing.
    """
    known = PROVIDERS.get(clazz)
    if known is not None:
        if isinstance(known[1], _Unsupported):
            known[1]()
        return
    if clazz.startswith("org.apache.flink.") or ".java_" in clazz:
        raise UnsupportedResourceError(f"{clazz} is a Java resource: {_JAVA}")
    _import_class(clazz, strict=True)


def create_resource(clazz: str, **arguments: Any) -> Any:
    """The resource the class path ``clazz`` names, created from ``arguments`` (the
    provider of every ``ResourceDescriptor(clazz=...)`` in a plan)."""
    check_class(clazz)
    known = PROVIDERS.get(clazz)
    if known is not None:
        return known[1](**arguments)
    return adapted(_import_class(clazz, strict=True)(**arguments))


def adapted(resource: Any) -> Any:
    """``resource``, or for a chat or embedding model setup of Apache Flink Agents' kind
    (a user's own), the model of ours that answers through it."""
    from flink_agents.api.chat_models.chat_model import BaseChatModelSetup
    from flink_agents.api.embedding_models.embedding_model import BaseEmbeddingModelSetup

    if isinstance(resource, BaseChatModelSetup):
        return ResourceChatModel(resource)
    if isinstance(resource, BaseEmbeddingModelSetup):
        return ResourceEmbeddingModel(resource)
    return resource


def _import_class(clazz: str, *, strict: bool) -> Any:
    module_name, _, name = clazz.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError, ValueError) as error:
        if not strict:
            return None
        raise FlinkAgentsError(
            f"resource class {clazz!r} cannot be imported ({type(error).__name__}: {error}); "
            "Apache Flink Agents' integrations are named by ResourceName's constants "
            "(docs/migrating.md)"
        ) from None


def _client_args(
    kind: str, arguments: dict[str, Any], *, base_urls: tuple[str, ...], timeout: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The OpenAI client's arguments (``base_url``, ``api_key``, ``timeout``,
    ``max_retries``) from a connection's arguments of theirs, and the arguments left over.

    Ollama takes ``base_url`` (its root: ``/v1`` is its OpenAI-compatible API) and
    ``request_timeout``; OpenAI the first of ``base_urls`` given, ``api_key``, ``timeout``
    (by that name) and ``max_retries``.
    """
    rest = dict(arguments)
    if kind == "ollama":
        root = str(rest.pop("base_url", OLLAMA_URL)).rstrip("/")
        client: dict[str, Any] = {"base_url": f"{root}/v1", "api_key": NO_KEY}
        waited = rest.pop("request_timeout", None)
    else:
        url = None
        for name in base_urls:  # the first given; a later spelling beside it is unknown
            url = rest.pop(name, None)
            if url:
                break
        client = {"base_url": url or OPENAI_URL}
        key = rest.pop("api_key", None)
        if key:
            client["api_key"] = key
        waited = rest.pop(timeout, None)
        if "max_retries" in rest:
            client["max_retries"] = int(rest.pop("max_retries"))
    if waited is not None:
        client["timeout"] = float(waited)
    return client, rest


class ChatModelConnection:
    """A chat model provider's address and credentials, shared by the setups naming it.

    Args:
        kind: ``"ollama"`` or ``"openai"``: which arguments it takes.
        **arguments: theirs: ``base_url`` and ``request_timeout`` (Ollama); ``api_key``,
            ``api_base_url``, ``timeout``, ``max_retries`` and ``default_headers``
            (OpenAI).
    """

    resource_kind = ResourceType.CHAT_MODEL_CONNECTION

    def __init__(self, kind: str, **arguments: Any) -> None:
        self.kind = kind
        self.client_args, rest = _client_args(
            kind, arguments, base_urls=("api_base_url", "base_url"), timeout="timeout"
        )
        headers = rest.pop("default_headers", None) if kind == "openai" else None
        if headers:
            self.client_args["extra_args"] = {"extra_headers": dict(headers)}
        if kind == "openai":
            rest.pop("reuse_client", None)
        if rest:
            raise FlinkAgentsError(
                f"unknown arguments of a {kind} chat model connection: {sorted(rest)}"
            )

    def model(self, model: str, **settings: Any) -> BaseChatModel:
        """The chat model ``model`` at this connection (an ``OpenAIChatModel``)."""
        from flink_agents.integrations.chat import OpenAIChatModel

        extra = {**self.client_args.get("extra_args", {}), **settings.pop("extra_args", {})}
        args = {k: v for k, v in self.client_args.items() if k != "extra_args"}
        return OpenAIChatModel(model, **args, **settings, extra_args=extra)

    def __repr__(self) -> str:  # never the key
        return f"ChatModelConnection({self.kind!r}, base_url={self.client_args['base_url']!r})"


_SETTINGS = {"temperature": "temperature", "max_tokens": "max_tokens"}
_IGNORED = {
    "num_ctx",
    "keep_alive",
    "think",
    "strict",
    "request_timeout",
    "logprobs",
    "top_logprobs",
    "allowed_commands",
}
"""Setup arguments with no counterpart in an OpenAI-compatible request made here; they change
nothing (``docs/migrating.md``)."""


class ChatModelSetup(BaseChatModel):
    """A chat model of Apache Flink Agents' kind: a model at a named connection, with an
    optional prompt (filled from the messages' ``extra_args``) and tools.

    Args:
        connection: the name of a ``chat_model_connection`` resource.
        model: the model's name at that provider.
        prompt: a ``Prompt``, or the name of a prompt resource.
        tools: names of tool resources offered when a request names none.
        skills: names of skills (their 0.3): the agent's skills resource's tools are offered
            and its summary follows the prompt's system messages (all its skills: a subset
            is not picked).
        extract_reasoning: take ``<think>`` blocks out of replies (into the message's
            ``extra_args["reasoning"]``).
        additional_kwargs: more request fields, sent as they are.
        **settings: ``temperature``, ``max_tokens``, ``reasoning_effort``, ...
    """

    def __init__(
        self,
        connection: str,
        model: str | None = None,
        prompt: Prompt | str | Mapping[str, Any] | None = None,
        tools: Sequence[str] | None = None,
        skills: Sequence[str] | None = None,
        extract_reasoning: bool = False,
        additional_kwargs: Mapping[str, Any] | None = None,
        **settings: Any,
    ) -> None:
        if not model:
            raise FlinkAgentsError(f"chat model setup on connection {connection!r} needs model=")
        self.connection = connection
        self.model_name = model
        self.prompt = Prompt.model_validate(prompt) if isinstance(prompt, Mapping) else prompt
        self.tools = tuple(tools or ())
        self.skills = tuple(skills or ())
        if self.skills:
            self.tools += tuple(t for t in (LOAD_SKILL, READ_SKILL_FILE) if t not in self.tools)
        self.extract_reasoning = extract_reasoning
        self._settings: dict[str, Any] = {}
        extra = dict(additional_kwargs or {})
        for name, value in settings.items():
            if name in _SETTINGS:
                self._settings[_SETTINGS[name]] = value
            elif name == "reasoning_effort":
                if value is not None:
                    extra["reasoning_effort"] = value
            elif name not in _IGNORED:
                raise FlinkAgentsError(
                    f"unknown argument {name!r} of chat model setup {model!r} "
                    f"(known: connection, model, prompt, tools, extract_reasoning, "
                    f"additional_kwargs, {', '.join(sorted(_SETTINGS))})"
                )
        if extra:
            self._settings["extra_args"] = extra
        self._get_resource: ResourceLookup | None = None
        self._model: BaseChatModel | None = None

    def bind_resources(self, get_resource: ResourceLookup) -> None:
        """Called by the runner once it has created this model: how it finds its
        connection and prompt."""
        self._get_resource = get_resource

    @property
    def delegate(self) -> BaseChatModel:
        """The ``OpenAIChatModel`` this setup answers through (made at first use)."""
        if self._model is None:
            connection = self._resource(self.connection, ResourceType.CHAT_MODEL_CONNECTION)
            if not isinstance(connection, ChatModelConnection):
                raise FlinkAgentsError(
                    f"chat model connection {self.connection!r} is a "
                    f"{type(connection).__name__}: a setup needs a connection declared with "
                    "ResourceName.ChatModel's OLLAMA_CONNECTION or OPENAI_CONNECTION"
                )
            self._model = connection.model(self.model_name, **dict(self._settings))
        return self._model

    def _resource(self, name: str, kind: ResourceType) -> Any:
        if self._get_resource is None:
            raise FlinkAgentsError(
                f"chat model setup {self.model_name!r} is not bound to a runner's resources"
            )
        return self._get_resource(name, kind)

    def prompted(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        """``messages`` behind this setup's prompt, filled with their ``extra_args`` (the
        messages with no text, but an assistant's, are dropped, as Apache Flink Agents
        does), and with its skills' summary after the leading system messages."""
        prompted = list(messages)
        if self.prompt is not None:
            prompt = self.prompt
            if isinstance(prompt, str):
                prompt = self._resource(prompt, ResourceType.PROMPT)
            prompted = behind_prompt(prompt, messages)
        if self.skills:
            offering = self._resource(LOAD_SKILL, ResourceType.TOOL)
            prompted = offering.skills.add_summary(prompted)
        return prompted

    @durable_name("flink_agents.migration:ChatModelSetup.chat")
    def chat(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] | None = None,
        output_schema: OutputSchema | None = None,
    ) -> ChatResponse:
        response = self.delegate.chat(self.prompted(messages), tools, output_schema)
        if self.extract_reasoning:
            response = _without_thinking(response)
        return response

    def estimate_tokens(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] | None = None
    ) -> int:
        return super().estimate_tokens(self.prompted(messages), tools)

    def close(self) -> None:
        close = getattr(self._model, "close", None)
        if callable(close):
            close()

    def __repr__(self) -> str:
        return f"ChatModelSetup({self.model_name!r}, connection={self.connection!r})"


def _without_thinking(response: ChatResponse) -> ChatResponse:
    message = response.message
    found = _THINKING.findall(message.content)
    if not found:
        return response
    text = _THINKING.sub("", message.content).strip()
    reasoning = "\n\n".join(part.strip() for part in found if part.strip())
    extra = {**message.extra_args, "reasoning": reasoning}
    cleaned = message.model_copy(update={"content": text, "extra_args": extra})
    return response.model_copy(update={"message": cleaned})


class EmbeddingModelConnection:
    """An embedding provider's address and credentials (Ollama or OpenAI)."""

    resource_kind = ResourceType.EMBEDDING_MODEL_CONNECTION

    def __init__(self, kind: str, **arguments: Any) -> None:
        self.kind = kind
        self.client_args, rest = _client_args(
            kind, arguments, base_urls=("base_url",), timeout="request_timeout"
        )
        if kind == "openai":
            for unused in ("organization", "project"):
                rest.pop(unused, None)
        if rest:
            raise FlinkAgentsError(
                f"unknown arguments of a {kind} embedding model connection: {sorted(rest)}"
            )

    def model(self, model: str, dimension: int | None = None) -> BaseEmbeddingModel:
        from flink_agents.integrations.embeddings import OpenAIEmbeddingModel

        return OpenAIEmbeddingModel(model, dimension=dimension, **self.client_args)

    def __repr__(self) -> str:
        return f"EmbeddingModelConnection({self.kind!r}, base_url={self.client_args['base_url']!r})"


class EmbeddingModelSetup(BaseEmbeddingModel):
    """An embedding model at a named connection (Apache Flink Agents' setup)."""

    def __init__(
        self,
        connection: str,
        model: str | None = None,
        dimensions: int | None = None,
        **ignored: Any,
    ) -> None:
        if not model:
            raise FlinkAgentsError(
                f"embedding model setup on connection {connection!r} needs model="
            )
        self.connection = connection
        self.model_name = model
        self._dimension = dimensions
        self._get_resource: ResourceLookup | None = None
        self._model: BaseEmbeddingModel | None = None

    def bind_resources(self, get_resource: ResourceLookup) -> None:
        self._get_resource = get_resource

    @property
    def delegate(self) -> BaseEmbeddingModel:
        if self._model is None:
            if self._get_resource is None:
                raise FlinkAgentsError(f"embedding model {self.model_name!r} is not bound")
            connection = self._get_resource(
                self.connection, ResourceType.EMBEDDING_MODEL_CONNECTION
            )
            self._model = connection.model(self.model_name, self._dimension)
        return self._model

    @property
    def model_id(self) -> str:
        return self.delegate.model_id

    @property
    def dimension(self) -> int:
        return self.delegate.dimension

    @durable_name("flink_agents.migration:EmbeddingModelSetup.embed")
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.delegate.embed(texts)


def declared_resource(declaration: str) -> Any:
    """The resource a decorated declaration of an agent describes (the provider the plan
    names for ``@chat_model_setup`` and its kin): the declaration is called here, in the
    runner, so what it reads (an API key from the environment) never enters the plan."""
    function = import_ref(declaration)
    return materialize(function(), declaration)


def materialize(declared: Any, where: str) -> Any:
    """What a declaration returned, as a resource: a descriptor is created, an object of
    ours is used as it is."""
    from flink_agents.api import ResourceDescriptor

    if isinstance(declared, ResourceDescriptor):
        if isinstance(declared.provider, str):
            return import_ref(declared.provider)(**declared.args)
        return declared.provider(**declared.args)
    if declared is None:
        raise FlinkAgentsError(f"the resource declaration {where} returned None")
    return adapted(declared)


class ResourceChatModel(BaseChatModel):
    """A chat model setup of Apache Flink Agents' kind (``BaseChatModelSetup``, a user's
    own) as a model of ours: its ``chat`` answers, its tools are offered, and a final
    answer is validated into a requested output schema (JSON in its text)."""

    def __init__(self, setup: Any) -> None:
        self.setup = setup
        self.tools = tuple(setup.tools or ())

    def bind_resources(self, get_resource: ResourceLookup) -> None:
        self.setup.bind_resources(_for_their_code(get_resource))

    @durable_name("flink_agents.migration:ResourceChatModel.chat")
    def chat(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] | None = None,
        output_schema: OutputSchema | None = None,
    ) -> ChatResponse:
        reply = self.setup.chat(list(messages))
        if not isinstance(reply, ChatMessage):
            raise FlinkAgentsError(
                f"{type(self.setup).__name__}.chat returned a {type(reply).__name__}, not a "
                "ChatMessage"
            )
        structured = None
        if output_schema is not None and not reply.tool_calls:
            # (here: the chat integration imports the openai client, ~0.7 s)
            from flink_agents.integrations.chat.internal import parse_structured

            structured = parse_structured(reply.text, output_schema, type(self.setup).__name__)
        return ChatResponse(message=reply, structured=structured, model=type(self.setup).__name__)

    def close(self) -> None:
        self.setup.close()

    def __repr__(self) -> str:
        return f"ResourceChatModel({type(self.setup).__name__})"


class ResourceEmbeddingModel(BaseEmbeddingModel):
    """An embedding model setup of Apache Flink Agents' kind as a model of ours."""

    def __init__(self, setup: Any) -> None:
        self.setup = setup
        self._dimension: int | None = None

    def bind_resources(self, get_resource: ResourceLookup) -> None:
        self.setup.bind_resources(_for_their_code(get_resource))

    @property
    def model_id(self) -> str:
        kwargs = self.setup.model_kwargs
        return f"{type(self.setup).__name__}:{kwargs.get('model', '')}"

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = len(self.embed(["dimension"])[0])
        return self._dimension

    @durable_name("flink_agents.migration:ResourceEmbeddingModel.embed")
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):  # one text, not its characters
            texts = [texts]
        vectors = [list(self.setup.embed(text)) for text in texts]
        return [_normalized(vector) for vector in vectors]


def _normalized(vector: list[float]) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector] if norm else vector


def _for_their_code(get_resource: ResourceLookup) -> ResourceLookup:
    """Our resource lookup, handing their code tools with their interface."""

    def lookup(name: str, kind: ResourceType) -> Any:
        found = get_resource(name, kind)
        if isinstance(found, Tool):
            return ToolView(found)
        if isinstance(found, ResourceChatModel | ResourceEmbeddingModel):
            return found.setup
        return found

    return lookup


class ToolView:
    """A tool of ours with Apache Flink Agents' tool interface: ``name``, ``metadata``
    (``name``, ``description``, ``get_parameters_dict()``) and ``call(**arguments)``."""

    def __init__(self, tool: Tool) -> None:
        self.tool = tool

    @property
    def name(self) -> str:
        return self.tool.metadata.name

    @property
    def metadata(self) -> Any:
        spec = self.tool.metadata
        return _MetadataView(spec.name, spec.description, spec.parameters)

    def call(self, *args: Any, **kwargs: Any) -> Any:
        if not args:
            return self.tool.call(kwargs)
        function = getattr(self.tool, "function", None)
        if function is None:
            raise FlinkAgentsError(f"tool {self.name!r} takes keyword arguments only")
        return function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"ToolView({self.name!r})"


class _MetadataView:
    def __init__(self, name: str, description: str, parameters: dict[str, Any]) -> None:
        self.name = name
        self.description = description
        self.parameters = parameters

    def get_parameters_dict(self) -> dict[str, Any]:
        return dict(self.parameters)
