"""Apache Flink Agents' lenient template filling (``flink_agents.api.prompts.utils``)."""

from __future__ import annotations

import re
from typing import Any

_FIELD = re.compile(r"\{([^{}]+)\}")


class SafeFormatter:
    """Fills ``{name}`` fields whose names it was given, leaving every other brace."""

    def __init__(self, kwargs: dict[str, Any] | None = None) -> None:
        self.kwargs = kwargs or {}

    def format(self, text: str) -> str:
        return _FIELD.sub(self._fill, text)

    def _fill(self, match: re.Match[str]) -> str:
        name = match.group(1)
        return str(self.kwargs[name]) if name in self.kwargs else match.group(0)


def format_string(text: str, **kwargs: Any) -> str:
    """``text`` with each ``{name}`` whose name is given replaced by its value; any other
    brace, ``{{`` included, stays as it is (unlike ``str.format``)."""
    return SafeFormatter(kwargs).format(text)


__all__ = ["SafeFormatter", "format_string"]
