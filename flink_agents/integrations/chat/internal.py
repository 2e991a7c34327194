"""The chat integration's names for flink_agents' own packages, not for users.

The demo reads the same environment variables as ``OpenAIChatModel`` and names its server the
same way; chat models of Apache Flink Agents' kind (``flink_agents.migration``) validate a
structured reply as it does. It imports them from here, never from a private module of
``flink_agents.integrations.chat`` (``tests/test_imports.py``). Nothing here is promised to
users: names come and go with the packages that use them.
"""

from flink_agents.integrations.chat._openai import (
    API_KEY_ENV,
    BASE_URL_ENV,
    DEFAULT_BASE_URL,
    MODEL_ENV,
    host_of,
)
from flink_agents.integrations.chat._wire import parse_structured

__all__ = [
    "API_KEY_ENV",
    "BASE_URL_ENV",
    "DEFAULT_BASE_URL",
    "MODEL_ENV",
    "host_of",
    "parse_structured",
]
