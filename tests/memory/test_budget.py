"""Token budgets: newest memory within N tokens, the rest summarized by a compressor."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flink_agents.api import ChatMessage, MemorySetItem, MessageRole, ToolCall
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.memory.budget import (
    MESSAGE_OVERHEAD,
    SUMMARY_PREFIX,
    TokenBudgetError,
    WordPieceCounter,
    fit_to_budget,
    item_tokens,
    transcript,
)
from flink_agents.testing.llm_server import Rule


def words(text: str) -> int:
    """A counter whose figures the tests can work out by hand."""
    return len(text.split())


def user(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=text)


def assistant(text: str = "", calls: tuple[str, ...] = ()) -> ChatMessage:
    tool_calls = [ToolCall(id=c, name="lookup", arguments={"q": c}) for c in calls]
    return ChatMessage(role=MessageRole.ASSISTANT, content=text, tool_calls=tool_calls)


def tool(call_id: str, text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.TOOL, content=text, tool_call_id=call_id, name="lookup")


@dataclass
class Stored:
    """Like a long-term memory item: the message sits in ``item``."""

    id: int
    item: ChatMessage | str


class Recorder:
    """A compressor that remembers every call's argument."""

    def __init__(self, answer: str = "earlier talk") -> None:
        self.calls: list[list[Any]] = []
        self.answer = answer

    def __call__(self, dropped: list[Any]) -> str:
        self.calls.append(list(dropped))
        return self.answer


# --- conversations with tool calls, for the properties -----------------------------------

texts = st.text(alphabet="abcdefghij klmnop,.", min_size=0, max_size=40)


@st.composite
def conversations(draw: st.DrawFn) -> list[ChatMessage]:
    """User, assistant and tool-calling turns; answers sometimes arrive after a later user
    message (so a unit can span other items)."""
    out: list[ChatMessage] = []
    for turn in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "tools-late"]))
        if kind == "user":
            out.append(user(draw(texts)))
        elif kind == "assistant":
            out.append(assistant(draw(texts)))
        else:
            ids = tuple(f"c{turn}-{n}" for n in range(draw(st.integers(1, 3))))
            out.append(assistant(draw(texts), ids))
            if kind == "tools-late":
                out.append(user(draw(texts)))
            out.extend(tool(call_id, draw(texts)) for call_id in ids)
    return out


def units_are_whole(items: list[ChatMessage], kept: list[ChatMessage]) -> bool:
    kept_ids = {id(m) for m in kept}
    for message in items:
        for call in message.tool_calls:
            answers = [m for m in items if m.tool_call_id == call.id]
            together = [id(message) in kept_ids] + [id(m) in kept_ids for m in answers]
            if len(set(together)) > 1:
                return False
    return True


@settings(max_examples=150, deadline=None)
@given(items=conversations(), budget=st.integers(1, 120), with_summary=st.booleans())
def test_budget_order_and_tool_units_hold_for_any_conversation(items, budget, with_summary):
    compressor = Recorder("short") if with_summary else None
    try:
        result = fit_to_budget(items, budget, compressor=compressor, counter=words)
    except TokenBudgetError:
        # Only when even the summary alone is over budget.
        summary = ChatMessage(role=MessageRole.SYSTEM, content=SUMMARY_PREFIX + "short")
        assert with_summary and item_tokens(summary, words) > budget
        return

    # Budget respected, and ``tokens`` is what the items really cost.
    assert result.tokens == sum(item_tokens(i, words) for i in result.items)
    assert result.tokens <= budget
    # Oldest dropped first: what is dropped is a prefix, what is kept the rest, in order.
    assert result.dropped + result.kept == items
    # A tool call and its answers are never split.
    assert units_are_whole(items, result.kept)
    # The compressor saw exactly what was dropped (its last call, after any re-summary).
    if compressor is not None and result.dropped:
        assert compressor.calls[-1] == result.dropped
        assert result.items[0] is result.summary
    else:
        assert result.summary is None and result.items == result.kept


def test_keeps_the_newest_that_fit_and_drops_the_oldest():
    items = [user("one two three"), user("four five"), user("six"), user("seven eight")]
    # Costs with overhead 4: 7, 6, 5, 6. Budget 12 holds the last two, not a third.
    result = fit_to_budget(items, 12, counter=words)
    assert result.kept == items[2:]
    assert result.dropped == items[:2]
    assert result.tokens == 11
    assert result.summary is None


def test_an_older_small_item_is_not_kept_once_a_newer_one_was_dropped():
    big = user(" ".join(["w"] * 50))
    items = [user("tiny"), big, user("last")]
    result = fit_to_budget(items, 20, counter=words)
    # "tiny" would fit, but keeping it would leave a hole in the conversation.
    assert result.kept == [items[2]]
    assert result.dropped == items[:2]


def test_everything_fits_and_the_compressor_is_not_called():
    items = [user("a b"), assistant("c d")]
    compressor = Recorder()
    result = fit_to_budget(items, 100, compressor=compressor, counter=words)
    assert result.items == items and result.dropped == [] and result.summary is None
    assert compressor.calls == []


def test_tool_call_and_its_results_are_dropped_together():
    call = assistant("", ("a", "b"))
    answer_a = tool("a", "order 42 shipped")
    answer_b = tool("b", "order 43 lost")
    items = [user("where are my orders"), call, answer_a, answer_b, user("thanks")]
    # The newest message and answer_b would fit without the call; they must not be kept.
    small = item_tokens(items[4], words) + item_tokens(answer_b, words)
    result = fit_to_budget(items, small, counter=words)
    assert result.kept == [items[4]]
    assert result.dropped == items[:4]

    whole = sum(item_tokens(m, words) for m in items[1:])
    result = fit_to_budget(items, whole, counter=words)
    assert result.kept == items[1:]


def test_an_answer_that_arrives_later_keeps_everything_between_with_its_call():
    call = assistant("checking", ("x",))
    items = [user("old"), call, user("also this"), tool("x", "done"), user("new")]
    budget = sum(item_tokens(m, words) for m in items[2:])
    result = fit_to_budget(items, budget, counter=words)
    # items[2:] fit, but the answer needs its call: the whole span goes.
    assert result.kept == [items[4]]


def test_the_compressor_receives_exactly_the_dropped_items_as_given():
    items = [Stored(n, user(f"fact number {n} is one we want to keep")) for n in range(6)]
    compressor = Recorder("facts 0 to 2")
    per_item = item_tokens(items[0], words)
    summary_cost = item_tokens(SUMMARY_PREFIX + "facts 0 to 2", words) + MESSAGE_OVERHEAD
    budget = 3 * per_item + summary_cost
    assert 4 * per_item > budget  # so the first choice already leaves room for the summary
    result = fit_to_budget(items, budget, compressor=compressor, counter=words)

    assert compressor.calls == [items[:3]]
    assert all(a is b for a, b in zip(compressor.calls[0], items[:3], strict=True))
    assert result.kept == items[3:]
    assert result.summary == ChatMessage(
        role=MessageRole.SYSTEM, content=SUMMARY_PREFIX + "facts 0 to 2"
    )
    assert result.items == [result.summary, *items[3:]]
    assert result.tokens == budget


def test_a_summary_that_does_not_fit_drops_more_and_is_made_again():
    items = [user(f"message {n} here") for n in range(8)]  # 7 tokens each
    # The summary costs 16 (8 words, 4 of prefix, 4 of overhead): three more messages go.
    compressor = Recorder("one two three four five six seven eight")
    result = fit_to_budget(items, 35, compressor=compressor, counter=words)

    assert compressor.calls == [items[:3], items[:6]]  # 5 kept at first (35 tokens)
    assert result.dropped == items[:6]
    assert result.tokens == 2 * 7 + 16
    assert result.dropped + result.kept == items


def test_a_summary_larger_than_the_whole_budget_is_a_clear_error():
    items = [user("a b c"), user("d e f")]
    compressor = Recorder(" ".join(["long"] * 40))
    with pytest.raises(TokenBudgetError, match=r"summary of 2 dropped items takes .* budget of 10"):
        fit_to_budget(items, 10, compressor=compressor, counter=words)


def test_without_a_compressor_nothing_summarizes_and_an_item_too_big_is_dropped():
    items = [user("a"), user(" ".join(["w"] * 30))]
    result = fit_to_budget(items, 10, counter=words)
    assert result.kept == [] and result.dropped == items and result.items == []
    assert result.tokens == 0


def test_strings_and_wrapped_items_come_back_unchanged():
    items = ["plain text memory", Stored(1, "wrapped text"), Stored(2, user("hi"))]
    result = fit_to_budget(items, 100, counter=words)
    assert result.items == items
    assert result.tokens == 3 + 2 + (1 + MESSAGE_OVERHEAD)


def test_empty_memory_gives_an_empty_result():
    result = fit_to_budget([], 50, compressor=Recorder())
    assert result.items == [] and result.kept == [] and result.dropped == []
    assert result.summary is None and result.tokens == 0


@pytest.mark.parametrize("budget", [0, -5])
def test_a_budget_that_is_not_positive_is_a_clear_error(budget):
    with pytest.raises(TokenBudgetError, match=f"max_tokens must be at least 1, got {budget}"):
        fit_to_budget([user("hi")], budget)
    with pytest.raises(TokenBudgetError, match="at least 1"):
        fit_to_budget([], budget)


def test_bad_arguments_are_clear_errors():
    with pytest.raises(TypeError, match="max_tokens must be an int"):
        fit_to_budget([user("hi")], 10.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="memory items must be ChatMessage, str"):
        fit_to_budget([user("hi"), 42], 10)
    with pytest.raises(TypeError, match="compressor must be callable"):
        fit_to_budget([user("fits")], 100, compressor="summarize", counter=words)
    with pytest.raises(ValueError, match="empty summary"):
        fit_to_budget([user("a b c d e"), user("f")], 6, compressor=lambda d: " ", counter=words)
    with pytest.raises(TypeError, match="token counter must return an int"):
        fit_to_budget([user("hi")], 10, counter=lambda text: 1.5)  # type: ignore[arg-type]


def test_the_default_counter_is_the_shipped_wordpiece_tokenizer():
    count = WordPieceCounter()
    # Rare words split into pieces, common ones stay whole; no [CLS]/[SEP] counted.
    assert count("the") == 1
    assert count("antidisestablishmentarianism") > 3
    assert count("") == 0
    # No truncation: the embedding model stops at 256 pieces, a counter must not.
    assert count("word " * 1000) == 1000
    # Used when no counter is given.
    message = user("antidisestablishmentarianism")
    assert item_tokens(message) == count(message.content) + MESSAGE_OVERHEAD
    result = fit_to_budget([message], item_tokens(message))
    assert result.kept == [message]
    assert fit_to_budget([message], item_tokens(message) - 1).kept == []


def test_transcript_shows_calls_and_answers():
    items = [user("where is 42"), assistant("", ("k",)), tool("k", "shipped"), "a note"]
    assert transcript(items) == (
        'user: where is 42\nassistant calls lookup({"q": "k"})\n'
        "tool lookup answers: shipped\na note"
    )


def test_a_chat_model_compressor_summarizes_the_dropped_items_over_http(llm_server):
    llm_server.add_rule(
        Rule(system_contains="compress an agent's memory", reply_text="User prefers green tea.")
    )
    model = OpenAIChatModel(
        "scripted", base_url=llm_server.base_url, api_key="test-key", retry_initial_wait=0.01
    )
    items = [
        Stored(1, user("I like green tea, not coffee")),
        Stored(2, assistant("Noted: you prefer green tea to coffee, every morning and evening.")),
        Stored(3, user("What is the weather today?")),
        Stored(4, assistant("Sunny.")),
    ]
    summary = ChatMessage(
        role=MessageRole.SYSTEM, content=SUMMARY_PREFIX + "User prefers green tea."
    )
    newest = item_tokens(items[3]) + item_tokens(items[2])
    budget = newest + item_tokens(summary)
    assert item_tokens(items[1]) > item_tokens(summary)  # so both older items are dropped
    result = fit_to_budget(items, budget, compressor=model)

    assert result.kept == items[2:] and result.dropped == items[:2]
    assert result.summary == summary
    assert result.items[0] is result.summary
    assert result.tokens == budget
    [call] = llm_server.calls
    sent = call.request["messages"]
    limit = item_tokens(summary) - MESSAGE_OVERHEAD
    assert sent[0]["role"] == "system" and f"at most {limit} tokens" in sent[0]["content"]
    # The model was given the dropped items, and only those.
    assert sent[1]["content"] == (
        "user: I like green tea, not coffee\n"
        "assistant: Noted: you prefer green tea to coffee, every morning and evening."
    )


def test_long_term_memory_items_are_budgeted_by_what_they_hold():
    def stored(n: int, value: ChatMessage | str) -> MemorySetItem:
        now = datetime.now(UTC)
        return MemorySetItem(id=str(n), memory_set_name="chat", item=value, created_time=now)

    items = [stored(1, "likes tea"), stored(2, user("book a table")), stored(3, "says hi")]
    result = fit_to_budget(items, 2 + 3 + MESSAGE_OVERHEAD, counter=words)
    assert result.kept == items[1:] and result.dropped == items[:1]
