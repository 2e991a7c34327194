"""Events as Apache Flink Agents names them (``flink_agents.api.events.event``).

``InputEvent`` and ``OutputEvent`` are ours. ``Event`` here is the base of events written
for Apache Flink Agents: it takes fields it does not declare, and (their 0.3 and later) a
``type`` string with ``attributes``, routed to the actions that listen to that string
(``@action("MyType")``).

An event of a type string is an instance of a class made for that string: its routes are a
class's routes (the runtime dispatches on classes), and its pickle names the class here,
where ``__getattr__`` makes it again in any process, so the event survives checkpoints and
the action log.
"""

from __future__ import annotations

import importlib
import json
import threading
from typing import Any, ClassVar

from pydantic import ConfigDict, Field

from flink_agents.api._chat import ChatRequestEvent, ChatResponseEvent
from flink_agents.api._events import Event as _Event
from flink_agents.api._events import InputEvent, OutputEvent
from flink_agents.api._retrieval import ContextRetrievalRequestEvent, ContextRetrievalResponseEvent
from flink_agents.api._tools import ToolRequestEvent, ToolResponseEvent

_TYPED_PREFIX = "TypedEvent_"
_LOCK = threading.Lock()
_BY_TYPE: dict[str, type[_Event]] = {
    cls.EVENT_TYPE: cls
    for cls in (
        InputEvent,
        OutputEvent,
        ChatRequestEvent,
        ChatResponseEvent,
        ToolRequestEvent,
        ToolResponseEvent,
        ContextRetrievalRequestEvent,
        ContextRetrievalResponseEvent,
    )
    if cls.EVENT_TYPE
}
"""Event classes by type string: the built-in ones, the subclasses of ``Event`` that set an
``EVENT_TYPE``, and the classes made for plain type strings."""


class Event(_Event):
    """An event of Apache Flink Agents' kind: extra fields allowed, and a ``type`` string
    with ``attributes`` for events that need no class of their own.

    ``Event(type="Done", attributes={"n": 1})`` is routed to ``@action("Done")``; a subclass
    with an ``EVENT_TYPE`` is routed both by class and by that string.
    """

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    type: str | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)

    EVENT_TYPE: ClassVar[str | None] = None

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        kind = kwargs.get("type")
        if cls is Event and isinstance(kind, str):
            target = typed_event_class(kind)
            if not issubclass(target, Event):  # a built-in event of ours: made here, whole
                # (not an instance of this class, so Python does not call __init__ again)
                fields = {k: v for k, v in kwargs.items() if k not in ("type", "attributes")}
                return target(**{**(kwargs.get("attributes") or {}), **fields})
            cls = target  # the instance's class, by its type
        return super().__new__(cls)

    @classmethod
    def from_json(cls, json_str: str) -> _Event:
        """The event a JSON object with a ``type`` (and ``attributes``) describes, pyflink
        ``Row`` s written as ``{"type": "Row", ...}`` made again.

        Raises:
            ValueError: the object has no ``type``.
        """
        data = json.loads(json_str)
        if not isinstance(data, dict) or not data.get("type"):
            raise ValueError("Event JSON must contain a non-empty 'type' field.")
        attributes = {k: _rows_made(v) for k, v in (data.get("attributes") or {}).items()}
        return Event(**{**data, "attributes": attributes})

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        declared = cls.__dict__.get("EVENT_TYPE")
        if isinstance(declared, str) and not cls.__name__.startswith(_TYPED_PREFIX):
            with _LOCK:
                _BY_TYPE.setdefault(declared, cls)

    def model_post_init(self, context: Any) -> None:
        if self.type is None and type(self).EVENT_TYPE is not None:
            self.type = type(self).EVENT_TYPE

    def get_type(self) -> str:
        """The type string this event is routed by (its class's path when it has none)."""
        return self.type or f"{type(self).__module__}.{type(self).__qualname__}"

    def get_attr(self, name: str) -> Any:
        """The attribute ``name``, or None."""
        return self.attributes.get(name)

    def set_attr(self, name: str, value: Any) -> None:
        """Set the attribute ``name``."""
        self.attributes[name] = value


def _rows_made(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get("type") == "Row" and "values" in value:
            row = importlib.import_module("pyflink.common").Row
            fields = value.get("fields")
            return (
                row(**dict(zip(fields, value["values"], strict=True)))
                if fields
                else row(*value["values"])
            )
        return {k: _rows_made(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rows_made(item) for item in value]
    return value


def typed_event_class(kind: str) -> type[_Event]:
    """The class whose events an action listening to the type string ``kind`` gets."""
    with _LOCK:
        known = _BY_TYPE.get(kind)
        if known is not None:
            return known
        name = _TYPED_PREFIX + kind.encode().hex()
        made = type(name, (Event,), {"__module__": __name__, "EVENT_TYPE": kind})
        made.__qualname__ = name
        _BY_TYPE[kind] = made
        return made


def __getattr__(name: str) -> Any:
    """The class of a type string, by the name a plan or a pickle knows it by."""
    if name.startswith(_TYPED_PREFIX):
        try:
            kind = bytes.fromhex(name.removeprefix(_TYPED_PREFIX)).decode()
        except ValueError:
            raise AttributeError(name) from None
        made = typed_event_class(kind)
        if made.__name__ == name:
            return made
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Event", "InputEvent", "OutputEvent", "typed_event_class"]
