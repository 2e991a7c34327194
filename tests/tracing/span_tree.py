"""Checks of the spans a traced run exported, read from any receiver: spans as dicts with
``name``, ``trace_id``, ``span_id``, ``parent_id`` and ``attributes`` (``normal`` makes them
from the OTLP receiver's or Phoenix's own form)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

Tree = tuple[str, tuple[Any, ...]]


def normal(span: dict[str, Any]) -> dict[str, Any]:
    """A span in the form these checks read: the OTLP receiver's (``parent_span_id``) or
    Phoenix's REST API's (``context``, ``parent_id``)."""
    if "context" in span:
        return {
            "name": span["name"],
            "trace_id": span["context"]["trace_id"],
            "span_id": span["context"]["span_id"],
            "parent_id": span.get("parent_id"),
            "start": span["start_time"],
            "attributes": flat(span.get("attributes") or {}),
            "error": span.get("status_code") == "ERROR",
        }
    return {
        "name": span["name"],
        "trace_id": span["trace_id"],
        "span_id": span["span_id"],
        "parent_id": span["parent_span_id"],
        "start": span["start_ns"],
        "attributes": span["attributes"],
        "error": span["status_code"] == "ERROR",
    }


def flat(attributes: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Attributes as dotted names (Phoenix hands them back nested: ``{"gen_ai": {...}}``)."""
    out: dict[str, Any] = {}
    for name, value in attributes.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{name}."))
        else:
            out[f"{prefix}{name}"] = value
    return out


def by_trace(spans: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    traces: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for span in spans:
        traces[span["trace_id"]].append(span)
    return dict(traces)


def root_of(trace: list[dict[str, Any]]) -> dict[str, Any]:
    """The trace's one root span."""
    roots = [span for span in trace if span["parent_id"] is None]
    assert len(roots) == 1, [span["name"] for span in roots]
    return roots[0]


def tree(trace: list[dict[str, Any]], replayed: bool = False) -> Tree:
    """The trace as nested ``(name, children)``, children in the order they started; the
    spans of what ran (not replayed ones: ``replayed=True`` keeps them too)."""
    kept = [
        span
        for span in trace
        if replayed or not span["attributes"].get("flink_agents.replayed", False)
    ]
    children: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for span in kept:
        children[span["parent_id"]].append(span)

    def node(span: dict[str, Any]) -> Tree:
        below = sorted(children[span["span_id"]], key=lambda s: (s["start"], s["name"]))
        return span["name"], tuple(node(child) for child in below)

    return node(root_of(kept))


def orphans(trace: list[dict[str, Any]]) -> list[str]:
    """Spans whose parent is not in the trace."""
    ids = {span["span_id"] for span in trace}
    return [span["name"] for span in trace if span["parent_id"] not in (None, *ids)]


CHAT = ("chat scripted", ())
GUIDE = (
    "invoke_agent guide",
    (("action look", (("durable_call look_up", ()),)), ("action report", ())),
)
PLANNED = (
    "invoke_agent trip_planner",
    (
        ("action start", ()),
        ("action chat_model_action", (CHAT,)),
        ("action tool_call_action", (GUIDE, ("execute_tool weather", ()))),
        ("action chat_model_action", (CHAT,)),
        ("action finish", ()),
    ),
)
"""A run of ``trip_planner`` (``trace_agents.py``) that nothing interrupted."""


def usage(spans: list[dict[str, Any]]) -> tuple[int, int]:
    """Input and output tokens of the model calls that ran (replayed ones count none)."""
    calls = [
        s["attributes"]
        for s in spans
        if s["attributes"].get("gen_ai.operation.name") == "chat"
        and not s["attributes"]["flink_agents.replayed"]
    ]
    return (
        sum(a["gen_ai.usage.input_tokens"] for a in calls),
        sum(a["gen_ai.usage.output_tokens"] for a in calls),
    )


def served_usage(server: Any) -> tuple[int, int]:
    """Input and output tokens the scripted stand-in reported, over its chat calls."""
    answered = [call.response["usage"] for call in server.calls if call.endpoint == "chat"]
    return (
        sum(u["prompt_tokens"] for u in answered),
        sum(u["completion_tokens"] for u in answered),
    )


def paths(trace: list[dict[str, Any]] | Tree) -> set[tuple[str, ...]]:
    """Every path of span names from the root down, of what ran: the tree's shape, whatever
    ran twice (an action a restore ran again) or was replayed."""
    found: set[tuple[str, ...]] = set()

    def walk(node: Tree, above: tuple[str, ...]) -> None:
        path = (*above, node[0])
        found.add(path)
        for child in node[1]:
            walk(child, path)

    if isinstance(trace, list):
        unique = list({span["span_id"]: span for span in reversed(trace)}.values())
        trace = tree(unique)
    walk(trace, ())
    return found
