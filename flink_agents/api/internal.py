"""The api layer's names for flink_agents' own packages, not for agent authors.

The plan compiler, the runtime, the built-in agents and the integrations use some of the api
layer's machinery (the markers ``@action`` leaves,
references to code by ``module:qualname``) that is no part of the public API. They import it
from here, never from a private module of ``flink_agents.api`` (``tests/test_imports.py``).
Nothing here is promised to users: names come and go with the packages that use them.
"""

from flink_agents.api._agent import ACTION_ATTR, RESOURCE_ATTR
from flink_agents.api._chat import (
    DEFAULT_MAX_STEPS,
    DOCUMENT_TOKENS,
    IMAGE_TOKENS,
    LOW_DETAIL_IMAGE_TOKENS,
    OutputSchema,
    part_tokens,
    resolve_output_schema,
)
from flink_agents.api._environment import KeySelector
from flink_agents.api._knowledge import knowledge_text
from flink_agents.api._long_term import CompactionFunction, Tags, normalize_tags
from flink_agents.api._prompts import OfferedPrompt
from flink_agents.api._refs import RefError, import_ref, ref_of
from flink_agents.api._resources import is_env_ref
from flink_agents.api._tools import TOOL_ATTR, awaited, strip_titles

__all__ = [
    "ACTION_ATTR",
    "DEFAULT_MAX_STEPS",
    "DOCUMENT_TOKENS",
    "IMAGE_TOKENS",
    "LOW_DETAIL_IMAGE_TOKENS",
    "RESOURCE_ATTR",
    "TOOL_ATTR",
    "CompactionFunction",
    "KeySelector",
    "OfferedPrompt",
    "OutputSchema",
    "RefError",
    "Tags",
    "awaited",
    "import_ref",
    "is_env_ref",
    "knowledge_text",
    "normalize_tags",
    "part_tokens",
    "ref_of",
    "resolve_output_schema",
    "strip_titles",
]
