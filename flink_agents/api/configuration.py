"""Configuration as Apache Flink Agents names it (``flink_agents.api.configuration``).

``ctx.config`` is a ``ReadableConfiguration``: a read-only mapping (the agent's options
from its plan, overlaid with the action's own) with their typed getters. The environment's
``get_config()`` of an agent written for Apache Flink Agents is a ``Configuration``; its
options of ours configure the runner, the others reach every action as ``ctx.config``
(``docs/migrating.md``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from enum import Enum
from typing import Any


class ConfigOption:
    """A typed configuration key with a default."""

    def __init__(self, key: str, config_type: type, default: Any = None) -> None:
        self._key = key
        self._type = config_type
        self._default = default

    def get_key(self) -> str:
        return self._key

    def get_type(self) -> type:
        return self._type

    def get_default_value(self) -> Any:
        return self._default

    def __repr__(self) -> str:
        return f"ConfigOption({self._key!r}, {self._type.__name__}, {self._default!r})"


def _typed(value: Any, kind: type, key: str) -> Any:
    if value is None or isinstance(value, kind):
        return value
    try:
        if kind is bool and isinstance(value, str):
            if value.lower() not in ("true", "false"):
                raise ValueError(value)
            return value.lower() == "true"
        return kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"config {key!r} = {value!r} is not a {kind.__name__}") from None


class ReadableConfiguration(Mapping[str, Any]):
    """A read-only mapping of configuration values, with typed getters."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._values: dict[str, Any] = dict(values or {})

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._values!r})"

    def get(self, key: str | ConfigOption, default: Any = None) -> Any:  # type: ignore[override]
        """The value of ``key``, or ``default``; for a ``ConfigOption``, its value as its
        type, or its default."""
        if isinstance(key, ConfigOption):
            value = self._values.get(key.get_key(), key.get_default_value())
            kind = key.get_type()
            if isinstance(kind, type) and issubclass(kind, Enum) and isinstance(value, str):
                return kind(value)
            return _typed(value, kind, key.get_key()) if isinstance(kind, type) else value
        return self._values.get(key, default)

    def get_int(self, key: str, default: int | None = None) -> int | None:
        return _typed(self._values.get(key, default), int, key)

    def get_float(self, key: str, default: float | None = None) -> float | None:
        return _typed(self._values.get(key, default), float, key)

    def get_bool(self, key: str, default: bool | None = None) -> bool | None:
        return _typed(self._values.get(key, default), bool, key)

    def get_str(self, key: str, default: str | None = None) -> str | None:
        value = self._values.get(key, default)
        return None if value is None else str(value)


class WritableConfiguration:
    """Setters of a configuration."""

    _values: dict[str, Any]

    def set_str(self, key: str, value: str) -> None:
        self._values[key] = value

    def set_int(self, key: str, value: int) -> None:
        self._values[key] = value

    def set_float(self, key: str, value: float) -> None:
        self._values[key] = value

    def set_bool(self, key: str, value: bool) -> None:
        self._values[key] = value

    def set(self, option: ConfigOption | str, value: Any) -> None:
        key = option.get_key() if isinstance(option, ConfigOption) else option
        self._values[key] = value.value if isinstance(value, Enum) else value


class Configuration(ReadableConfiguration, WritableConfiguration):
    """A writable configuration (what ``get_config()`` returns)."""

    __slots__ = ()

    def get_conf_data(self) -> dict[str, Any]:
        """Every value, by key."""
        return dict(self._values)

    def load_from_file(self, path: str) -> None:
        """Add the values of a YAML file: its ``agent:`` section (flattened with dots), or
        the whole file when it has none."""
        import yaml

        with open(path, encoding="utf-8") as file:
            data = yaml.safe_load(file) or {}
        section = data.get("agent", data) if isinstance(data, dict) else {}
        self._values.update(_flattened(section))


def _flattened(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flattened(value, f"{name}."))
        else:
            flat[name] = value
    return flat


__all__ = [
    "ConfigOption",
    "Configuration",
    "ReadableConfiguration",
    "WritableConfiguration",
]
