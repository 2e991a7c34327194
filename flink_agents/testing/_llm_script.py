"""The pure half of the scripted LLM stand-in: rules, matching, replies, usage, embedding
vectors and the rate limit's window.

Nothing here touches sockets or clocks (the window is handed the time), so the server module
only adds HTTP and bookkeeping.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

# The keys a script file may set besides ``rules``: the server's own keyword arguments.
SCRIPT_SETTINGS = (
    "default_reply",
    "latency_s",
    "embedding_dim",
    "requests_per_minute",
    "refuse_parts",
)

# The usage counts a rule may set; the rest stay the stand-in's word counts.
USAGE_KEYS = ("prompt_tokens", "completion_tokens", "cached_tokens")


@dataclass(frozen=True)
class ToolCallSpec:
    """A tool call the stand-in model asks for: the tool's name and its JSON arguments."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("ToolCallSpec.name must be a non-empty string")
        if not isinstance(self.arguments, Mapping):
            raise ValueError(f"ToolCallSpec {self.name!r}: arguments must be a mapping")


@dataclass(frozen=True)
class Rule:
    """One scripted answer and the conditions under which the stand-in gives it.

    Every condition that is given must hold; a rule without conditions always matches. Exactly
    one reply field must be given. ``reply_text`` may contain ``{last_user}`` and
    ``{tool_result}``, replaced literally (other braces are left alone, so JSON in a reply is
    safe). ``times`` caps how often the rule answers before it is skipped. ``usage`` overrides
    the token counts the answer reports, any of ``prompt_tokens``, ``completion_tokens`` and
    ``cached_tokens`` (reported as ``usage.prompt_tokens_details.cached_tokens``, as OpenAI
    does); ``total_tokens`` stays prompt plus completion.
    """

    last_user_contains: str | None = None
    last_user_matches: str | None = None
    system_contains: str | None = None
    after_tool: str | None = None
    has_tools: bool | None = None
    model: str | None = None
    reply_text: str | None = None
    reply_tool_calls: Sequence[ToolCallSpec] | None = None
    reply_json: Any | None = None
    times: int | None = None
    usage: Mapping[str, int] | None = None

    def __post_init__(self) -> None:
        replies = [self.reply_text, self.reply_tool_calls, self.reply_json]
        if sum(reply is not None for reply in replies) != 1:
            raise ValueError("a Rule needs exactly one of reply_text, reply_tool_calls, reply_json")
        if self.reply_tool_calls is not None:
            calls = tuple(_tool_call(call) for call in self.reply_tool_calls)
            if not calls:
                raise ValueError("Rule.reply_tool_calls must name at least one tool call")
            object.__setattr__(self, "reply_tool_calls", calls)
        if self.times is not None and self.times < 1:
            raise ValueError("Rule.times must be at least 1 (leave it out for no limit)")
        if self.last_user_matches is not None:
            re.compile(self.last_user_matches)  # a bad pattern fails here, not mid-request
        if self.usage is not None:
            object.__setattr__(self, "usage", _checked_usage(self.usage))

    def matches(self, request: Mapping[str, Any]) -> bool:
        """Whether every condition given holds for this chat completion request."""
        messages = request.get("messages") or []
        last_user = last_message_text(messages, "user")
        if self.last_user_contains is not None and (
            last_user is None or self.last_user_contains.lower() not in last_user.lower()
        ):
            return False
        if self.last_user_matches is not None and (
            last_user is None or re.search(self.last_user_matches, last_user) is None
        ):
            return False
        if self.system_contains is not None and not any(
            self.system_contains in message_text(m)
            for m in messages
            if m.get("role") in ("system", "developer")
        ):
            return False
        if self.after_tool is not None and answered_tool(messages) != self.after_tool:
            return False
        if self.has_tools is not None and bool(request.get("tools")) != self.has_tools:
            return False
        return self.model is None or request.get("model") == self.model


def _checked_usage(usage: Any) -> dict[str, int]:
    """A copy of a rule's usage override, so the rule cannot change after it was checked."""
    if not isinstance(usage, Mapping):
        raise ValueError(f"Rule.usage must be a mapping, got {usage!r}")
    unknown = set(usage) - set(USAGE_KEYS)
    if unknown:
        raise ValueError(f"Rule.usage: unknown keys {sorted(unknown)}; use {list(USAGE_KEYS)}")
    for key, count in usage.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"Rule.usage[{key!r}] must be a non-negative int, got {count!r}")
    return dict(usage)


def _tool_call(spec: ToolCallSpec | Mapping[str, Any]) -> ToolCallSpec:
    """Scripts give tool calls as mappings; code may give either form."""
    if isinstance(spec, ToolCallSpec):
        return spec
    if isinstance(spec, Mapping):
        return ToolCallSpec(**spec)
    raise ValueError(f"not a tool call: {spec!r}")


def message_text(message: Mapping[str, Any]) -> str:
    """A message's text, whether its content is a string or a list of typed parts (its text
    parts, joined by spaces)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type", "text") == "text"
        )
    return ""


def last_message_text(messages: Sequence[Mapping[str, Any]], role: str) -> str | None:
    """The text of the latest message with this role, or None when there is none."""
    for message in reversed(messages):
        if message.get("role") == role:
            return message_text(message)
    return None


def answered_tool(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The tool name whose result is the last message, found through its ``tool_call_id``."""
    if not messages or messages[-1].get("role") != "tool":
        return None
    call_id = messages[-1].get("tool_call_id")
    for message in reversed(messages[:-1]):
        for call in message.get("tool_calls") or []:
            if isinstance(call, Mapping) and call.get("id") == call_id:
                return (call.get("function") or {}).get("name")
    return None


def fill_placeholders(template: str, messages: Sequence[Mapping[str, Any]]) -> str:
    """Literal replacement rather than ``str.format``: replies often contain JSON braces."""
    last_user = last_message_text(messages, "user") or ""
    tool_result = last_message_text(messages, "tool") or ""
    return template.replace("{last_user}", last_user).replace("{tool_result}", tool_result)


def count_words(text: str) -> int:
    """The stand-in's token count: whitespace-separated words, deterministic and cheap."""
    return len(text.split())


def prompt_words(request: Mapping[str, Any]) -> int:
    """Usage for a chat request: the words of every message's text."""
    return sum(count_words(message_text(m)) for m in request.get("messages") or [])


def chat_usage(prompt: int, completion: int, override: Mapping[str, int] | None) -> dict[str, Any]:
    """A chat answer's ``usage``: the word counts, with a rule's override applied.

    ``prompt_tokens_details`` appears only when the override gives ``cached_tokens``, so
    answers without an override are what they always were.
    """
    override = override or {}
    prompt = override.get("prompt_tokens", prompt)
    completion = override.get("completion_tokens", completion)
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if "cached_tokens" in override:
        usage["prompt_tokens_details"] = {"cached_tokens": override["cached_tokens"]}
    return usage


class RequestWindow:
    """A sliding-window request limit: the policy behind the stand-in's ``requests_per_minute``.

    At most ``requests_per_minute * window_s / 60`` requests are counted in any ``window_s``
    seconds. The caller hands in the time (any monotonic clock, in seconds), so the policy is
    tested without sleeping; it is not thread-safe, the server calls it under its lock. A
    request counts from its admission; :meth:`release` takes back one whose answer was not a
    success, so only successful answers use up the limit.
    """

    def __init__(self, requests_per_minute: int, window_s: float = 60.0) -> None:
        if isinstance(requests_per_minute, bool) or not isinstance(requests_per_minute, int):
            raise ValueError(f"requests_per_minute must be an int, got {requests_per_minute!r}")
        if not (math.isfinite(window_s) and window_s > 0):
            raise ValueError(f"window_s must be a positive number of seconds, got {window_s!r}")
        self.requests_per_minute = requests_per_minute
        self.window_s = window_s
        self.allowed = requests_per_minute * window_s / 60
        if self.allowed < 1:
            raise ValueError(
                f"{requests_per_minute} requests per minute admit no request in a "
                f"{window_s:g} s window: raise one of them"
            )
        self._admitted: deque[float] = deque()  # admission times, oldest first

    def admit(self, now: float) -> float | None:
        """Count a request made at ``now``, or say how long until one would be counted.

        Returns None when the request is counted; when it would exceed the limit, nothing is
        counted and the result is the seconds until the oldest counted request leaves the
        window.
        """
        while self._admitted and self._admitted[0] <= now - self.window_s:
            self._admitted.popleft()
        if len(self._admitted) + 1 > self.allowed:
            return self._admitted[0] + self.window_s - now
        self._admitted.append(now)
        return None

    def clear(self) -> None:
        """Forget every counted request."""
        self._admitted.clear()

    def release(self, admitted_at: float) -> None:
        """Stop counting the request admitted at ``admitted_at`` (gone already: nothing to do)."""
        if admitted_at in self._admitted:
            self._admitted.remove(admitted_at)


def embed(text: str, dim: int) -> list[float]:
    """A deterministic unit vector for ``text``: for plumbing tests only, with no semantics.

    Each lowercase word is hashed (SHA-256, so runs and processes agree) into one of ``dim``
    buckets with a sign; texts sharing words therefore share components, nothing more. Text
    without words gets the first basis vector, so cosine distances never divide by zero.
    """
    vector = [0.0] * dim
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha256(word.encode("utf-8")).digest()
        bucket = int.from_bytes(digest[:8], "big") % dim
        vector[bucket] += 1.0 if digest[8] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0.0:
        return [1.0] + [0.0] * (dim - 1)
    return [x / norm for x in vector]


def load_script(source: str | Path | Mapping[str, Any] | Sequence[Any]) -> dict[str, Any]:
    """Read a script into ``{"rules": [Rule, ...], <setting>: value}``.

    A script is either a list of rules or a mapping with ``rules`` and any of
    ``default_reply``, ``latency_s``, ``embedding_dim``, ``requests_per_minute``,
    ``refuse_parts``. A string or
    path names a YAML or JSON file (JSON is valid YAML, so one parser reads both).
    """
    data: Any = source
    if isinstance(source, str | Path):
        data = yaml.safe_load(Path(source).read_text(encoding="utf-8"))
    if isinstance(data, list | tuple):
        data = {"rules": data}
    if not isinstance(data, Mapping):
        raise ValueError("a script is a list of rules or a mapping with a 'rules' list")
    unknown = set(data) - {"rules", *SCRIPT_SETTINGS}
    if unknown:
        raise ValueError(f"unknown script keys: {sorted(unknown)}")
    rules = data.get("rules") or []
    if not isinstance(rules, list | tuple):
        raise ValueError("a script's 'rules' must be a list")
    loaded = {key: data[key] for key in SCRIPT_SETTINGS if key in data}
    loaded["rules"] = [rule_from_mapping(rule, index) for index, rule in enumerate(rules)]
    return loaded


_RULE_FIELDS = frozenset(f.name for f in fields(Rule))


def rule_from_mapping(data: Any, index: int = 0) -> Rule:
    """One script rule, with errors that say which rule is wrong."""
    if isinstance(data, Rule):
        return data
    if not isinstance(data, Mapping):
        raise ValueError(f"rule {index}: expected a mapping, got {data!r}")
    unknown = set(data) - _RULE_FIELDS
    if unknown:
        raise ValueError(f"rule {index}: unknown fields {sorted(unknown)}")
    try:
        return Rule(**data)
    except (TypeError, ValueError, re.error) as error:
        raise ValueError(f"rule {index}: {error}") from None


def tool_call_json(spec: ToolCallSpec, call_id: str) -> dict[str, Any]:
    """The OpenAI wire form of one tool call: arguments travel as a JSON string."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": spec.name, "arguments": json.dumps(dict(spec.arguments))},
    }
