"""Resources as Apache Flink Agents names them (``flink_agents.api.resource``).

``ResourceDescriptor(clazz=..., **arguments)`` names a resource class by its dotted path;
``ResourceName`` spells the paths of their integrations, which map to ours
(``docs/migrating.md``). A descriptor built this way is a ``flink_agents.api``
``ResourceDescriptor`` too, so everything that takes one takes it.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from flink_agents.api._agent import resource as _resource
from flink_agents.api._resources import ResourceDescriptor as _Descriptor
from flink_agents.api._resources import ResourceType, UnknownResourceError

CREATE_RESOURCE = "flink_agents.migration:create_resource"
"""The provider a plan names for a resource declared by class path."""


class Resource(BaseModel):
    """Base of resource classes written for Apache Flink Agents: pydantic models, their
    arguments fields.

    ``get_resource(name, type)`` finds another resource of the same agent once the runner
    has created this one (it calls ``bind_resources``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="allow")

    get_resource: Any = Field(default=None, exclude=True)
    _metric_group: Any = PrivateAttr(default=None)

    @classmethod
    def resource_type(cls) -> ResourceType:
        """The type of resource this class declares."""
        return ResourceType.CUSTOM

    def bind_resources(self, get_resource: Any) -> None:
        """Called by the runner after creating the resource."""
        self.get_resource = get_resource

    def set_metric_group(self, metric_group: Any) -> None:
        """Give the resource a metric group of its own."""
        self._metric_group = metric_group

    @property
    def metric_group(self) -> Any:
        """The metric group given with ``set_metric_group``, or None."""
        return self._metric_group

    def close(self) -> None:
        """Release what the resource holds (called when the runner closes)."""


class SerializableResource(Resource):
    """A resource whose fields travel inside a plan (JSON)."""


class ResourceDescriptor(_Descriptor):
    """A resource class by dotted path, with the keyword arguments that create it.

    Args:
        clazz: the class, or its dotted path (``ResourceName.ChatModel.OLLAMA_SETUP``).
        target_module, target_clazz: the path in two parts, instead of ``clazz``.
        arguments: arguments as a dict; ``**kwargs`` are merged over them.

    Arguments are written into the plan: give secrets as environment references
    (``{"env": "OPENAI_API_KEY"}`` or ``"${env:OPENAI_API_KEY}"``), or declare the resource
    with a decorated method, which runs in the runner.
    """

    def __init__(
        self,
        /,
        *,
        clazz: str | type | None = None,
        target_module: str | None = None,
        target_clazz: str | None = None,
        arguments: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(clazz, type):
            clazz = f"{clazz.__module__}.{clazz.__qualname__}"
        if clazz is not None:
            target_module, _, target_clazz = clazz.rpartition(".")
        if not target_module or not target_clazz:
            raise ValueError("The fully qualified name of the resource must be specified")
        args = {**(arguments or {}), **kwargs}
        path = f"{target_module}.{target_clazz}"
        migration = importlib.import_module("flink_agents.migration")
        kind = migration.resource_type_of(path) or ResourceType.CUSTOM
        super().__init__(CREATE_RESOURCE, kind, clazz=path, **args)
        self.target_module = target_module
        self.target_clazz = target_clazz

    @property
    def arguments(self) -> dict[str, Any]:
        """The arguments the class is created with."""
        return {k: v for k, v in self.args.items() if k != "clazz"}

    @property
    def clazz(self) -> Any:
        """The class the path names (imported now)."""
        return getattr(importlib.import_module(self.target_module), self.target_clazz)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ResourceDescriptor):
            return NotImplemented
        return self.args == other.args

    def __hash__(self) -> int:
        return hash(repr(sorted(self.args.items(), key=lambda item: item[0])))


def get_resource_class(module_path: str, class_name: str) -> Any:
    """The class ``class_name`` of module ``module_path``."""
    return getattr(importlib.import_module(module_path), class_name)


_CHAT = "flink_agents.integrations.chat_models."
_EMBEDDING = "flink_agents.integrations.embedding_models."
_JAVA_CHAT = "org.apache.flink.agents.integrations.chatmodels."


class ResourceName:
    """The dotted paths of Apache Flink Agents' integrations, for
    ``ResourceDescriptor(clazz=...)``. Ollama and OpenAI ones run on our OpenAI-compatible
    client; the others fail with an error naming what to use (``docs/migrating.md``)."""

    class ChatModel:
        """Chat model connections and setups."""

        ANTHROPIC_CONNECTION = _CHAT + "anthropic.anthropic_chat_model.AnthropicChatModelConnection"
        ANTHROPIC_SETUP = _CHAT + "anthropic.anthropic_chat_model.AnthropicChatModelSetup"
        AZURE_OPENAI_CONNECTION = (
            _CHAT + "azure.azure_openai_chat_model.AzureOpenAIChatModelConnection"
        )
        AZURE_OPENAI_SETUP = _CHAT + "azure.azure_openai_chat_model.AzureOpenAIChatModelSetup"
        OLLAMA_CONNECTION = _CHAT + "ollama_chat_model.OllamaChatModelConnection"
        OLLAMA_SETUP = _CHAT + "ollama_chat_model.OllamaChatModelSetup"
        OPENAI_CONNECTION = _CHAT + "openai.openai_chat_model.OpenAIChatModelConnection"
        OPENAI_SETUP = _CHAT + "openai.openai_chat_model.OpenAIChatModelSetup"
        TONGYI_CONNECTION = _CHAT + "tongyi_chat_model.TongyiChatModelConnection"
        TONGYI_SETUP = _CHAT + "tongyi_chat_model.TongyiChatModelSetup"
        JAVA_WRAPPER_CONNECTION = (
            "flink_agents.api.chat_models.java_chat_model.JavaChatModelConnection"
        )
        JAVA_WRAPPER_SETUP = "flink_agents.api.chat_models.java_chat_model.JavaChatModelSetup"

        class Java:
            """Java chat models (not supported: they need a JVM runtime of agents)."""

            ANTHROPIC_CONNECTION = _JAVA_CHAT + "anthropic.AnthropicChatModelConnection"
            ANTHROPIC_SETUP = _JAVA_CHAT + "anthropic.AnthropicChatModelSetup"
            AZURE_CONNECTION = _JAVA_CHAT + "azureai.AzureAIChatModelConnection"
            AZURE_SETUP = _JAVA_CHAT + "azureai.AzureAIChatModelSetup"
            OLLAMA_CONNECTION = _JAVA_CHAT + "ollama.OllamaChatModelConnection"
            OLLAMA_SETUP = _JAVA_CHAT + "ollama.OllamaChatModelSetup"
            OPENAI_CONNECTION = _JAVA_CHAT + "openai.OpenAIChatModelConnection"
            OPENAI_SETUP = _JAVA_CHAT + "openai.OpenAIChatModelSetup"

    class EmbeddingModel:
        """Embedding model connections and setups."""

        OLLAMA_CONNECTION = (
            _EMBEDDING + "local.ollama_embedding_model.OllamaEmbeddingModelConnection"
        )
        OLLAMA_SETUP = _EMBEDDING + "local.ollama_embedding_model.OllamaEmbeddingModelSetup"
        OPENAI_CONNECTION = _EMBEDDING + "openai_embedding_model.OpenAIEmbeddingModelConnection"
        OPENAI_SETUP = _EMBEDDING + "openai_embedding_model.OpenAIEmbeddingModelSetup"
        JAVA_WRAPPER_CONNECTION = (
            "flink_agents.api.embedding_models.java_embedding_model.JavaEmbeddingModelConnection"
        )
        JAVA_WRAPPER_SETUP = (
            "flink_agents.api.embedding_models.java_embedding_model.JavaEmbeddingModelSetup"
        )

        class Java:
            """Java embedding models (not supported)."""

            OLLAMA_CONNECTION = (
                "org.apache.flink.agents.integrations.embeddingmodels.ollama."
                "OllamaEmbeddingModelConnection"
            )
            OLLAMA_SETUP = (
                "org.apache.flink.agents.integrations.embeddingmodels.ollama."
                "OllamaEmbeddingModelSetup"
            )

    class VectorStore:
        """Vector stores."""

        CHROMA_VECTOR_STORE = (
            "flink_agents.integrations.vector_stores.chroma.chroma_vector_store.ChromaVectorStore"
        )
        JAVA_WRAPPER_VECTOR_STORE = (
            "flink_agents.api.vector_stores.java_vector_store.JavaVectorStore"
        )
        JAVA_WRAPPER_COLLECTION_MANAGEABLE_VECTOR_STORE = (
            "flink_agents.api.vector_stores.java_vector_store.JavaCollectionManageableVectorStore"
        )

        class Java:
            """Java vector stores (not supported)."""

            ELASTICSEARCH_VECTOR_STORE = (
                "org.apache.flink.agents.integrations.vectorstores.elasticsearch."
                "ElasticsearchVectorStore"
            )

    MCP_SERVER = "flink_agents.integrations.mcp.mcp.MCPServer"


class _ResourceModule(types.ModuleType):
    """This module, callable as our ``@resource`` decorator.

    Importing a submodule sets it as an attribute of its package, so once this module is
    imported, ``flink_agents.api.resource`` names it rather than the decorator that
    ``flink_agents.api`` exports under the same name; calling the module calls the
    decorator, so ``from flink_agents.api import resource`` works either way."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _resource(*args, **kwargs)


sys.modules[__name__].__class__ = _ResourceModule

__all__ = [
    "Resource",
    "ResourceDescriptor",
    "ResourceName",
    "ResourceType",
    "SerializableResource",
    "UnknownResourceError",
    "get_resource_class",
]
