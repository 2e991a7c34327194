"""Reading and writing plans (JSON, YAML), with errors that point at the exact place."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from flink_agents.api import PlanError
from flink_agents.plan._bind import bind_plan
from flink_agents.plan._model import ActionSpec, AgentPlan, ResourceSpec

_SECTIONS: dict[str, tuple[str, type[BaseModel]]] = {
    "actions": ("action", ActionSpec),
    "resources": ("resource", ResourceSpec),
}


def validate_plan_data(data: Any, file: str | None = None) -> AgentPlan:
    """An ``AgentPlan`` from parsed JSON/YAML data, or a ``PlanError`` naming the place."""
    if not isinstance(data, dict):
        raise PlanError(
            f"a plan must be a mapping at the top level, got {type(data).__name__}", file=file
        )
    try:
        return AgentPlan.model_validate(data)
    except ValidationError as error:
        raise _plan_error(error, data, file) from None


def plan_from_json(text: str, file: str | None = None) -> AgentPlan:
    """Parse, validate and bind a plan written as JSON."""
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as error:
        raise PlanError(
            f"invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}", file=file
        ) from None
    except _DuplicateKey as error:
        raise PlanError(
            f"duplicate key {error.args[0]!r} in one JSON object: JSON would keep only the last",
            file=file,
        ) from None
    return _checked(validate_plan_data(data, file), file)


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key written twice (``json.loads`` keeps the last)."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _DuplicateKey(key)
        found[key] = value
    return found


def plan_from_yaml(text: str, file: str | None = None) -> AgentPlan:
    """Parse, validate and bind a plan written as YAML."""
    import yaml  # here: a Flink operator reads its plan as JSON, and starts sooner without

    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise PlanError(f"invalid YAML{where}: {problem}", file=file) from None
    if data is None:
        raise PlanError("the plan is empty: expected a mapping with name and actions", file=file)
    duplicate = _first_duplicate_key(root, [])
    if duplicate is not None and isinstance(data, dict):
        loc, first, second = duplicate
        place = _place(loc, data)
        raise PlanError(
            f"duplicate key {loc[-1]!r} at lines {first} and {second}: YAML would keep only "
            "the last one",
            file=file,
            **place,
        )
    return _checked(validate_plan_data(data, file), file)


def load_plan(path: str | Path) -> AgentPlan:
    """Load a plan file (``.yaml``, ``.yml`` or ``.json``), checking that all its code imports.

    Raises:
        PlanError: the message starts with the file and names the agent, action and field.
    """
    path = Path(path)
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise PlanError(f"cannot read plan: {error.strerror}", file=file) from None
    if path.suffix == ".json":
        return plan_from_json(text, file)
    if path.suffix in (".yaml", ".yml"):
        return plan_from_yaml(text, file)
    raise PlanError("unknown plan format: use .yaml, .yml or .json", file=file)


def save_plan(plan: AgentPlan, path: str | Path) -> Path:
    """Write ``plan`` as YAML or JSON, by the file's suffix."""
    path = Path(path)
    path.write_text(plan.to_json() if path.suffix == ".json" else plan.to_yaml(), encoding="utf-8")
    return path


def _first_duplicate_key(node: Any, loc: list[Any]) -> tuple[list[Any], int, int] | None:
    """The first key written twice in one YAML mapping (``yaml.safe_load`` silently keeps
    the last): its location, and the lines of both."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        seen: dict[tuple[str, str], int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            key = key_node.value
            line = key_node.start_mark.line + 1
            if (key_node.tag, key) in seen:
                return [*loc, key], seen[key_node.tag, key], line
            seen[key_node.tag, key] = line
            found = _first_duplicate_key(value_node, [*loc, key])
            if found is not None:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            found = _first_duplicate_key(item, [*loc, index])
            if found is not None:
                return found
    return None


def _checked(plan: AgentPlan, file: str | None) -> AgentPlan:
    bind_plan(plan, file)
    return plan


def _plan_error(error: ValidationError, data: dict[str, Any], file: str | None) -> PlanError:
    problems = error.errors()
    # A failing item also fails its container (e.g. "actions" too short): keep the cause.
    locations = [tuple(p["loc"]) for p in problems]
    problems = [
        p
        for p in problems
        if not any(
            len(other) > len(p["loc"]) and other[: len(p["loc"])] == tuple(p["loc"])
            for other in locations
        )
    ]
    first = problems[0]
    loc = list(first["loc"])
    if first["type"] == "duplicate_name":
        context = first.get("ctx", {})
        place = {"agent": _agent_name(data), context["kind"]: context["name"], "field": "name"}
        reason = f"duplicate {context['kind']} name {context['name']!r}"
    else:
        place = _place(loc, data)
        in_section = len(loc) >= 2 and loc[0] in _SECTIONS and isinstance(loc[1], int)
        reason = _reason(first, _SECTIONS[str(loc[0])][1] if in_section else AgentPlan)
    more = len(problems) - 1
    if more:
        reason += f" (and {more} more problem{'s' if more > 1 else ''})"
    return PlanError(reason, file=file, **place)


def _agent_name(data: dict[str, Any]) -> str | None:
    return data.get("name") if isinstance(data.get("name"), str) else None


def _place(loc: list[Any], data: dict[str, Any]) -> dict[str, Any]:
    """Agent, action or resource, and field of location ``loc`` in the plan ``data``."""
    place: dict[str, Any] = {"agent": _agent_name(data)}
    if len(loc) >= 2 and loc[0] in _SECTIONS and isinstance(loc[1], int):
        kind = _SECTIONS[str(loc[0])][0]
        place[kind] = _item_name(data.get(loc[0]), loc[1])
        loc = loc[2:]
    if loc:
        place["field"] = _render_loc(loc)
    return place


def _item_name(items: Any, index: int) -> str:
    try:
        name = items[index].get("name")
    except (AttributeError, IndexError, KeyError, TypeError):
        name = None
    return name if isinstance(name, str) and name else f"#{index + 1}"


def _render_loc(loc: list[Any]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _reason(problem: Any, model: type[BaseModel]) -> str:
    kind = problem["type"]
    value = problem.get("input")
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return f"unknown field; allowed fields are {', '.join(model.model_fields)}"
    if kind == "string_pattern_mismatch":
        field_name = problem["loc"][-1]
        if field_name in ("function", "provider") or isinstance(field_name, int):
            return f"{value!r} is not a reference: write it as 'package.module:qualified_name'"
        return f"{value!r} is not a valid name: use letters, digits, '_' and '-'"
    if kind == "too_short":
        field_name = problem["loc"][-1] if problem["loc"] else ""
        if field_name == "listen_to":
            return "must name at least one event type"
        if field_name == "actions":
            return "a plan needs at least one action"
        return f"needs at least {problem['ctx']['min_length']} item(s)"
    if kind in ("tuple_type", "list_type"):
        return f"expected a list, got {type(value).__name__} {value!r}"
    if kind == "string_type":
        return f"expected a string, got {type(value).__name__} {value!r}"
    if kind == "dict_type":
        return f"expected a mapping, got {type(value).__name__} {value!r}"
    if kind == "value_error":
        return problem["msg"].removeprefix("Value error, ")
    if kind == "model_type":
        return f"expected a mapping, got {type(value).__name__}"
    return f"{problem['msg'].rstrip('.')} (got {value!r})"
