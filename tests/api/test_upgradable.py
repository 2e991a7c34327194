"""Our pydantic objects pickled into Flink state and the action log by an older release (before
a field was added) read back with the new field's default."""

import pickle

import pytest

from flink_agents.api import ChatMessage, ChatRequestEvent, ChatResponse, MessageRole, TokenUsage


def pickled_without(obj, *fields):
    """``obj`` as an older release pickled it: its state without ``fields``."""
    state = obj.__getstate__()
    older = {**state, "__dict__": {k: v for k, v in state["__dict__"].items() if k not in fields}}
    restored = type(obj).__new__(type(obj))
    restored.__setstate__(older)
    return restored


@pytest.mark.parametrize(
    ("obj", "added"),
    [
        (ChatRequestEvent(model="m", messages=[]), ("max_total_tokens", "max_time")),
        (TokenUsage(prompt_tokens=3, completion_tokens=2, total_tokens=5), ("cached_tokens",)),
        (
            ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="hi")),
            ("attempts",),
        ),
        (ChatMessage(role=MessageRole.USER, content="hi"), ("extra_args",)),
    ],
)
def test_a_field_added_since_it_was_pickled_gets_its_default(obj, added):
    restored = pickled_without(obj, *added)
    assert restored == obj
    assert pickle.loads(pickle.dumps(obj)) == obj


def test_sums_of_usage_pickled_before_cached_tokens_still_add_up():
    older = pickled_without(TokenUsage(prompt_tokens=3, total_tokens=3), "cached_tokens")
    assert (older + TokenUsage(prompt_tokens=2, total_tokens=2, cached_tokens=1)) == TokenUsage(
        prompt_tokens=5, total_tokens=5, cached_tokens=1
    )
