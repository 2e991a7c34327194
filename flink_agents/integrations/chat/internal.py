"""The chat integration's names for flink_agents' own packages, not for users.

The demo reads the same environment variables as ``OpenAIChatModel`` and names its server the
same way. It imports them from here, never from a private module of
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

__all__ = ["API_KEY_ENV", "BASE_URL_ENV", "DEFAULT_BASE_URL", "MODEL_ENV", "host_of"]
