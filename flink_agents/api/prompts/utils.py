"""Apache Flink Agents' lenient template filling (``flink_agents.api.prompts.utils``)."""

from __future__ import annotations

import re
from typing import Any

_FIELD = re.compile(r"\{([^{}]+)\}")


def format_string(text: str, **kwargs: Any) -> str:
    """``text`` with each ``{name}`` whose name is given replaced by its value; any other
    brace, ``{{`` included, stays as it is (unlike ``str.format``)."""

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        return str(kwargs[name]) if name in kwargs else match.group(0)

    return _FIELD.sub(fill, text)


__all__ = ["format_string"]
