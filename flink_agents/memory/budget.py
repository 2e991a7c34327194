"""Token budgets: choose the memory that goes into a prompt, newest first, within N tokens.

A prompt has room for only so many tokens of memory. :func:`fit_to_budget` keeps the newest
items that fit, drops the oldest, and (given a ``compressor``) replaces what it dropped by one
summary message placed first, so the model still knows what happened earlier (seed 003's
``max_tokens`` and memory compressor). An assistant message that calls tools and the tool
messages answering it are one unit: kept together or dropped together, because a chat API
rejects a tool result whose call is missing, and a call without its result misleads the model.

Items are ``ChatMessage`` objects, strings, or objects whose ``item`` attribute holds one of
those (the items long-term memory returns); they come back unchanged, in their order.

Counting tokens: the right count is the chat model's own tokenizer, which this package cannot
ship for every provider (OpenAI's BPE files, for one, are downloaded at run time, which these
machines and many clusters cannot do). The default, :class:`WordPieceCounter`, runs a real
tokenizer that already ships with the package: the WordPiece vocabulary of the offline MiniLM
embedding model. It is an estimate of the chat model's count, not that count: on English text
it is close to a BPE count (both split rare words into pieces and keep common words whole),
it differs more on code and other scripts. Leave headroom in ``max_tokens``, or pass the
model's own tokenizer as ``counter`` where you have it. A word or character count would be
simpler, but it is further off in both directions (long words, punctuation, CJK text).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from flink_agents.api import BaseChatModel, ChatMessage, MessageRole, TextPart
from flink_agents.api.internal import part_tokens

__all__ = [
    "MESSAGE_OVERHEAD",
    "SUMMARY_PREFIX",
    "BudgetResult",
    "Compressor",
    "TokenBudgetError",
    "TokenCounter",
    "WordPieceCounter",
    "fit_to_budget",
    "item_tokens",
    "transcript",
]

TokenCounter = Callable[[str], int]
"""Tokens of one text."""

Compressor = Callable[[list[Any]], "str | ChatMessage"]
"""Summarizes the dropped items (as given, oldest first) into a text or a message."""

MESSAGE_OVERHEAD = 4
"""Tokens a chat message costs beyond its texts (role and separators in the chat format)."""

SUMMARY_PREFIX = "Summary of earlier memory: "
"""Starts a summary given as text, so the model reads it as a summary and not an order."""

_SUMMARY_INSTRUCTION = (
    "You compress an agent's memory. Summarize the conversation below in at most {limit} "
    "tokens. Keep facts, names, numbers, decisions, user preferences and the results of tool "
    "calls; leave out greetings and repetition. Answer with the summary only."
)


class TokenBudgetError(ValueError):
    """A budget that cannot be met: not a positive size, or no room even for the summary."""


class WordPieceCounter:
    """Counts word pieces with the MiniLM tokenizer shipped with this package.

    No truncation and no special tokens: the count of the text itself. The tokenizer loads
    on first use (a few milliseconds) and is shared by every instance; counting is
    thread-safe.
    """

    _lock = threading.Lock()
    _tokenizer: Any = None

    def __call__(self, text: str) -> int:
        if not text:
            return 0
        return len(self._load().encode(text, add_special_tokens=False).ids)

    @classmethod
    def _load(cls) -> Any:
        if cls._tokenizer is None:
            with cls._lock:
                if cls._tokenizer is None:
                    from tokenizers import Tokenizer

                    from flink_agents.integrations.embeddings import LocalEmbeddingModel

                    tokenizer = Tokenizer.from_file(str(LocalEmbeddingModel().tokenizer_path))
                    # The file truncates to 128 pieces and pads (for the model): not for counting.
                    tokenizer.no_truncation()
                    tokenizer.no_padding()
                    cls._tokenizer = tokenizer
        return cls._tokenizer


@dataclass(frozen=True)
class BudgetResult:
    """What fits, and what was left out.

    Attributes:
        items: the prompt's memory: the summary first (when there is one), then the kept
            items unchanged, oldest first.
        kept: the kept items, oldest first.
        dropped: the items left out, oldest first (what the compressor summarized).
        summary: the summary message, or None when nothing was dropped or no compressor
            was given.
        tokens: the tokens of ``items`` as counted, at most the budget.
    """

    items: list[Any] = field(default_factory=list)
    kept: list[Any] = field(default_factory=list)
    dropped: list[Any] = field(default_factory=list)
    summary: ChatMessage | None = None
    tokens: int = 0


def fit_to_budget(
    items: Sequence[Any],
    max_tokens: int,
    *,
    compressor: Compressor | BaseChatModel | None = None,
    counter: TokenCounter | None = None,
) -> BudgetResult:
    """The newest ``items`` that fit in ``max_tokens``, and a summary of the rest.

    Items are kept newest first until the next (older) one does not fit; that one and every
    older item are dropped, so what is kept is always the most recent stretch. A tool-calling
    assistant message and the tool messages answering it count as one unit. With a
    ``compressor``, the dropped items (exactly them, oldest first) are summarized into one
    message placed first; if the summary does not fit beside the kept items, more of the
    oldest kept items are dropped and the summary is made again from the larger set.

    Inside an action, call this through ``ctx.durable_execute`` when the compressor calls a
    model, so a replayed action reuses the summary instead of asking again.

    Args:
        items: the memory, oldest first: ``ChatMessage``, ``str``, or objects with an
            ``item`` attribute holding one of those.
        max_tokens: the budget for everything returned, summary included.
        compressor: a callable given the dropped items that returns the summary (text or a
            message), or a chat model asked to summarize them. None drops without a summary.
        counter: tokens of a text; defaults to :class:`WordPieceCounter`.

    Returns:
        The kept items, the dropped ones and the summary.

    Raises:
        TokenBudgetError: ``max_tokens`` is not positive, or the summary alone is larger
            than the budget.
        TypeError: ``max_tokens`` is not an int, or an item is not one of the supported kinds.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise TypeError(f"max_tokens must be an int, got {max_tokens!r}")
    if max_tokens <= 0:
        raise TokenBudgetError(f"max_tokens must be at least 1, got {max_tokens}")
    summarize = _as_compressor(compressor) if compressor is not None else None
    items = list(items)
    if not items:
        return BudgetResult()
    count = counter if counter is not None else WordPieceCounter()
    groups = _groups([_content(item) for item in items])
    costs = [sum(item_tokens(items[i], count) for i in group) for group in groups]

    # The newest stretch of whole groups that fits.
    first_kept, used = len(groups), 0
    while first_kept > 0 and used + costs[first_kept - 1] <= max_tokens:
        first_kept -= 1
        used += costs[first_kept]

    summary: ChatMessage | None = None
    if first_kept > 0 and summarize is not None:
        while True:
            dropped = [items[i] for group in groups[:first_kept] for i in group]
            summary = summarize(dropped, max_tokens - used)
            size = item_tokens(summary, count)
            if used + size <= max_tokens:
                used += size
                break
            if first_kept == len(groups):
                raise TokenBudgetError(
                    f"the summary of {len(dropped)} dropped items takes {size} tokens, more "
                    f"than the whole budget of {max_tokens}: raise max_tokens or make the "
                    "compressor answer shorter"
                )
            # Make room for a summary of this size, then summarize the larger set again.
            while first_kept < len(groups) and used + size > max_tokens:
                used -= costs[first_kept]
                first_kept += 1

    kept = [items[i] for group in groups[first_kept:] for i in group]
    dropped = [items[i] for group in groups[:first_kept] for i in group]
    prompt = ([summary] if summary is not None else []) + kept
    return BudgetResult(items=prompt, kept=kept, dropped=dropped, summary=summary, tokens=used)


def item_tokens(item: Any, counter: TokenCounter | None = None) -> int:
    """Tokens one item costs in a prompt: a string its text, a message its texts plus
    :data:`MESSAGE_OVERHEAD` (tool calls' names, ids and arguments included), an image or
    a document in it at ``BaseChatModel.estimate_tokens``' fixed estimate."""
    count = counter if counter is not None else WordPieceCounter()
    content = _content(item)
    if isinstance(content, str):
        return _checked(count, content)
    total = MESSAGE_OVERHEAD + _checked(count, content.text)
    if not isinstance(content.content, str):
        total += sum(part_tokens(part) for part in content.content)
    for text in (content.name, content.tool_call_id):
        if text:
            total += _checked(count, text)
    for call in content.tool_calls:
        arguments = call.arguments
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        total += sum(_checked(count, text) for text in (call.id, call.name, arguments))
    return total


def _checked(count: TokenCounter, text: str) -> int:
    tokens = count(text)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise TypeError(f"a token counter must return an int >= 0, got {tokens!r}")
    return tokens


def _content(item: Any) -> ChatMessage | str:
    """The message or text an item holds."""
    if isinstance(item, (ChatMessage, str)):
        return item
    inner = getattr(item, "item", None)
    if isinstance(inner, (ChatMessage, str)):
        return inner
    raise TypeError(
        "memory items must be ChatMessage, str, or have an 'item' attribute holding one; "
        f"got {type(item).__name__}"
    )


def _groups(contents: list[ChatMessage | str]) -> list[list[int]]:
    """Indexes of the items, in units that are kept or dropped whole.

    A unit is one item, or the span from an assistant message with tool calls to the last
    tool message answering one of its calls (whatever lies between goes with it, so that no
    call is ever separated from its answer).
    """
    answers: dict[str, list[int]] = {}
    for index, content in enumerate(contents):
        if not isinstance(content, ChatMessage) or content.role != MessageRole.TOOL:
            continue
        if content.tool_call_id:
            answers.setdefault(content.tool_call_id, []).append(index)
    groups: list[list[int]] = []
    index = 0
    while index < len(contents):
        end = index
        scan = index
        while scan <= end:
            content = contents[scan]
            if isinstance(content, ChatMessage):
                for call in content.tool_calls:
                    later = [i for i in answers.get(call.id, ()) if i > scan]
                    if later:
                        end = max(end, *later)
            scan += 1
        groups.append(list(range(index, end + 1)))
        index = end + 1
    return groups


def _as_compressor(
    compressor: Compressor | BaseChatModel,
) -> Callable[[list[Any], int], ChatMessage]:
    """One call shape for both kinds of compressor: dropped items and room -> a message."""
    if isinstance(compressor, BaseChatModel):
        model = compressor

        def by_model(dropped: list[Any], room: int) -> ChatMessage:
            prompt = [
                ChatMessage(
                    role=MessageRole.SYSTEM,
                    content=_SUMMARY_INSTRUCTION.format(limit=max(room - MESSAGE_OVERHEAD, 1)),
                ),
                ChatMessage(role=MessageRole.USER, content=transcript(dropped)),
            ]
            return _summary_message(model.chat(prompt).message.content, model)

        return by_model
    if not callable(compressor):
        raise TypeError(
            f"compressor must be callable or a BaseChatModel, got {type(compressor).__name__}"
        )
    function = compressor

    def by_function(dropped: list[Any], room: int) -> ChatMessage:
        return _summary_message(function(dropped), function)

    return by_function


def _summary_message(summary: Any, source: object) -> ChatMessage:
    if isinstance(summary, ChatMessage):
        text = summary.text
    elif isinstance(summary, str):
        text = summary
    else:
        raise TypeError(
            f"compressor {source!r} must return a str or ChatMessage, got {type(summary).__name__}"
        )
    if not text.strip():
        raise ValueError(f"compressor {source!r} returned an empty summary")
    if isinstance(summary, ChatMessage):
        return summary
    return ChatMessage(role=MessageRole.SYSTEM, content=SUMMARY_PREFIX + text)


def _transcribed(message: ChatMessage) -> str:
    """A message's content as text, its parts other than text by their kind."""
    if isinstance(message.content, str):
        return message.content
    words = []
    for part in message.content:
        if isinstance(part, TextPart):
            words.append(part.text)
        else:
            name = getattr(part, "name", None)
            words.append(f"[{' '.join(x for x in (part.type, part.mime_type, name) if x)}]")
    return " ".join(words)


def transcript(items: Sequence[Any]) -> str:
    """The items as plain text, one per line, for a model to summarize.

    A message reads ``role: content``; a tool call reads ``assistant calls name(arguments)``
    and its answer ``tool name answers: content``. An image or a document reads as its
    kind in brackets (``[image image/png]``): a summary can say it was there.
    """
    lines = []
    for item in items:
        content = _content(item)
        if isinstance(content, str):
            lines.append(content)
            continue
        author = content.role.value if content.name is None else f"{content.role} {content.name}"
        text = _transcribed(content)
        if content.role == MessageRole.TOOL:
            lines.append(f"{author} answers: {text}")
            continue
        if text:
            lines.append(f"{author}: {text}")
        for call in content.tool_calls:
            arguments = call.arguments
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            lines.append(f"{author} calls {call.name}({arguments})")
    return "\n".join(lines)
