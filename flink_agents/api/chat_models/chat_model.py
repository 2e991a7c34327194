"""Chat model connections and setups as Apache Flink Agents names them
(``flink_agents.api.chat_models.chat_model``).

``BaseChatModelSetup`` is the setup resource that answers through a connection (the one
``ResourceName.ChatModel``'s setups create); ``BaseChatModelConnection`` is the connection
resource ours are. A model of your own is a subclass of our ``BaseChatModel``
(``flink_agents.api``), declared with ``@chat_model_setup`` returning it or its
``ResourceDescriptor``.
"""

from flink_agents.api._chat import BaseChatModel


def __getattr__(name: str) -> object:
    # The classes live with the runner's integrations: imported when first named.
    if name in ("BaseChatModelSetup", "BaseChatModelConnection"):
        import importlib

        migration = importlib.import_module("flink_agents.migration")
        value = {
            "BaseChatModelSetup": migration.ChatModelSetup,
            "BaseChatModelConnection": migration.ChatModelConnection,
        }[name]
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BaseChatModel"]  # and, made on first use, BaseChatModelConnection, BaseChatModelSetup
