"""Every id scheme in ``flink_agents._ids`` against golden values, and no id minted elsewhere.

The golden values were computed by the code before the schemes moved into one module (main at
d2e56d1): ids are persisted in Flink state, action logs, vector stores and users' systems, so
a value here never changes under its scheme's version. A new derivation is a new version with
new golden values beside these.
"""

from __future__ import annotations

import ast
import decimal
import functools
import importlib
import inspect
import pkgutil
import types
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from flink_agents import _ids as ids
from flink_agents.agents._retrieval import search_knowledge_set
from flink_agents.api import (
    BaseChatModel,
    BaseEmbeddingModel,
    ChatMessage,
    FunctionTool,
    KnowledgeSet,
    MemorySet,
    Tool,
)
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.integrations.vector_stores import VectorStore
from flink_agents.runtime._context import _answered
from flink_agents.runtime._spend import SpendGuard

PACKAGE = Path(ids.__file__).parent


def test_each_scheme_has_a_version():
    assert ids.SCHEMES == {
        "key": 1,
        "input-event": 2,
        "sub-run-input": 1,
        "derived-event": 1,
        "external": 1,
        "point": 1,
        "knowledge-document": 1,
        "memory-set": 1,
        "compacted-item": 1,
        "call-function": 1,
        "call-arguments": 1,
        "memory-key": 1,
        "scheduled-handle": 1,
    }


def test_key_spelling():
    assert ids.key_text("u1") == '"u1"'
    assert ids.key_text(7) == "7"
    assert ids.key_text(("a", 1)) == '["a",1]'
    assert ids.key_text(None) == "null"
    assert ids.key_text({"b": 2, "a": [1, 2]}) == '{"a":[1,2],"b":2}'
    assert ids.key_text(1.5) == "1.5"
    assert ids.key_text(object) == "repr:<class 'object'>"
    assert ids.key_text("1") != ids.key_text(1)


def test_input_event_ids():
    assert uuid.UUID("f1d46a44-b7f6-5754-b1bb-1ada8e5fb372") == ids.ACTION_LOG_NAMESPACE
    assert str(ids.input_event_id("job-1", "u1", 0)) == "e94ac24f-df2d-54fa-ad1d-55e28ad5c490"
    assert str(ids.input_event_id("job-1", "u1", 41)) == "e94ac24f-df2d-54fa-ad1d-55e28ad5c4b9"
    assert str(ids.input_event_id("job-1", 7, 3)) == "0a6f07fe-2b29-5ad6-a8dc-a7b9a393b21f"
    assert str(ids.input_event_id("j", ("a", 1), 2**40)) == "f4cdb155-e6bd-56ce-98c0-52ce70c92373"


def test_sub_run_and_derived_event_ids():
    assert str(ids.sub_run_input_id("job-1", "u1", 3, 2, "act/sub#0/")) == (
        "9259e638-fd0c-5749-9676-6da08c609075"
    )
    parent = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert str(ids.derived_event_id(parent, "react-request")) == (
        "abd73747-d18a-5f34-97fc-0738c49b5748"
    )


def test_scheduled_event_handles():
    assert ids.scheduled_handle(3, 2, "act", 0) == "ade82660-d4f7-5541-84e2-a6f4f5cbb726"
    assert ids.scheduled_handle(3, 2, "act", 1) == "841c3832-9beb-590d-958b-857df33c2eb9"


def test_ids_of_writes_outside_flink():
    identity = ("job-1", '"u1"', 3, 2, "act")
    assert ids.external_id(identity, 0) == "b913232b-3de3-557a-bec6-c0e27dfbffc2"
    assert ids.external_id(identity, 5) == "ab6d875d-bfe0-5b1f-b8e8-eb59db5d2f1d"
    assert ids.point_id(*identity, "ltm", "notes", 0) == "da2cafda-b871-571f-9785-aef77918fd3e"
    assert ids.knowledge_document_id("faq", "doc-1") == "a07cfd2a-88c7-5f7e-841c-4729107682ab"
    assert ids.memory_set_id("u1", "notes") == ids.point_id("memory-set", "u1", "notes")
    assert ids.knowledge_set_id("faq") == ids.point_id("knowledge-set", "faq")
    assert ids.compacted_item_ids("u1", "notes", "a", "b", 4, 2) == [
        ids.point_id("compacted", "u1", "notes", "a", "b", 4, n) for n in range(2)
    ]
    assert ids.memory_key_text("u1") == "u1"
    assert ids.memory_key_text(1) == "int:1"


def test_call_ids():
    assert (
        ids.digest_args(
            (1, "a", [1.5, None], {"x": {1, 2}}), {"k": b"z", "d": decimal.Decimal("1.10")}
        )
        == "4d591607b77edebfa5ba6457d3c0f5530e3d404828f20f758f24d9ffa377cdd1"
    )
    assert ids.digest_args((), {}) == (
        "1283c145bf51fd39d9213be7b015e8fddafce19b99da3f247316e0cc724f6384"
    )
    # A class of ours is named by the module that defines it, as before classes were
    # renamed by their public package: calls recorded then still match.
    messages = ([ChatMessage(role="user", content="hi")],)
    assert ids.digest_args(messages, {"model": "m"}) == (
        "608d609966a5274bac5ad1ab56db47a2d23e268c6d7f96e4c7a5bb76de6f592e"
    )
    assert ids.function_id(print) == "builtins:print"
    assert ids.function_id(test_call_ids) == "tests.test_ids:test_call_ids"


def test_no_module_but_ids_derives_uuids():
    """``uuid.uuid3``/``uuid5`` (name-based ids) are called in ``_ids`` only."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "_ids.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr in ("uuid3", "uuid5"):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
            if isinstance(node, ast.ImportFrom) and node.module == "uuid":
                names = {alias.name for alias in node.names}
                if names & {"uuid3", "uuid5"}:
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not offenders, f"name-based ids minted outside flink_agents/_ids.py: {offenders}"


# -- frozen names of durably-called functions of ours ----------------------------------------

FROZEN_NAMES = {
    "flink_agents.agents._retrieval:search_knowledge_set",
    "flink_agents.api._embedding:BaseEmbeddingModel.embed_one",
    "flink_agents.api._sub_agent:SubAgent.call",
    "flink_agents.api._tools:FunctionTool._acall",
    "flink_agents.api._tools:FunctionTool.call",
    "flink_agents.integrations.chat._openai:OpenAIChatModel.achat",
    "flink_agents.integrations.chat._openai:OpenAIChatModel.chat",
    "flink_agents.integrations.embeddings._local:LocalEmbeddingModel.embed",
    "flink_agents.integrations.embeddings._local:LocalEmbeddingModel.embed_one",
    "flink_agents.integrations.embeddings._openai:OpenAIEmbeddingModel.embed",
    "flink_agents.integrations.mcp._server:MCPTool.acall",
    "flink_agents.integrations.mcp._server:MCPTool.call",
    "flink_agents.memory.long_term._knowledge:StoredKnowledgeSet.search",
    "flink_agents.memory.long_term._sets:StoredMemorySet.search",
    "flink_agents.migration:ChatModelSetup.chat",
    "flink_agents.migration:EmbeddingModelSetup.embed",
    "flink_agents.migration:ResourceChatModel.chat",
    "flink_agents.migration:ResourceEmbeddingModel.embed",
    "flink_agents.runtime:SpendGuard.admit",
    "flink_agents:wait_for",
    "flink_agents.api:Skills.load_skill",
    "flink_agents.api:Skills.read_skill_file",
}
"""Golden: the names the action logs of 0.1.0 and 0.2.0 recorded calls of these functions
under (their ``module:qualname`` then; ``flink_agents:wait_for``, a wait's answer,
``flink_agents.runtime:SpendGuard.admit``, the budgets' verdict on a model call, and the skill
tools' ``flink_agents.api:Skills.load_skill`` and ``read_skill_file``, from 0.3.0). Never
edit one; a function of ours that becomes durably called adds its name here."""

DURABLE_METHODS = {"chat", "achat", "call", "acall", "embed", "embed_one", "search"}
"""What a resource of ours does when an action calls it durably: the built-in actions call
chat models, tools and knowledge sets, and an action of a user's may pass any of these
(embeddings, searches of memory sets, knowledge sets and vector stores) to
``ctx.durable_execute``."""

DURABLE_CALL_SITES = {
    "agents/_retrieval.py": ["search", "store.search"],
    "agents/_builtin.py": ["run"],
    "agents/_model_call.py": ["spend.admit", "route", "chat"],
    "testing/recovery.py": ["ledger_call", "ledger_call"],
    "runtime/_context.py": ["partial(_answered, waited.reply)"],
}
"""The first argument of each ``durable_execute``/``durable_execute_async`` call in
flink_agents, by file: ``search`` is a partial of ``search_knowledge_set``, ``store.search``
a knowledge set's, ``chat`` a chat model's ``chat`` or ``achat``, ``run`` a tool's ``call``
or ``acall``, ``route`` a user's function, ``spend.admit`` ``SpendGuard.admit`` (a
frozen name); ``ledger_call`` lives in a public module; ``_answered`` (a wait's answer,
``ctx.wait_for``) has a frozen name."""


@functools.cache
def _modules_of_ours() -> list[types.ModuleType]:
    skipped = (".__main__", ".examples", ".cli")
    names = [m.name for m in pkgutil.walk_packages([str(PACKAGE)], "flink_agents.")]
    return [importlib.import_module(n) for n in names if not any(s in n for s in skipped)]


def _functions_of_ours() -> list[Callable[..., Any]]:
    """Every function defined at module level or in a class body in flink_agents."""
    found: dict[int, Callable[..., Any]] = {}
    for module in _modules_of_ours():
        for value in vars(module).values():
            members = vars(value).values() if isinstance(value, type) else (value,)
            for member in members:
                member = getattr(member, "__func__", member)  # static and class methods
                if inspect.isfunction(member) and member.__module__.startswith("flink_agents"):
                    found[id(member)] = member
    return list(found.values())


def _private(name: str) -> bool:
    module = name.partition(":")[0]
    return any(part.startswith("_") for part in module.split("."))


def test_frozen_names_of_our_durable_functions_never_change():
    frozen = {
        getattr(f, ids.DURABLE_NAME_ATTR)
        for f in _functions_of_ours()
        if hasattr(f, ids.DURABLE_NAME_ATTR)
    }
    assert frozen == FROZEN_NAMES


def test_every_durably_called_function_of_ours_in_a_private_module_has_a_frozen_name():
    """Moving a private module of ours must not change the name a recorded call is matched
    by (it would be paid again on replay)."""
    bases = (BaseChatModel, Tool, BaseEmbeddingModel, KnowledgeSet, MemorySet, VectorStore)
    durable = [
        partial(search_knowledge_set, None),
        FunctionTool(_async_tool).acall,
        partial(_answered, None),
        SpendGuard.admit,
    ]
    for module in _modules_of_ours():
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, bases):
                durable += [
                    function
                    for name, function in vars(value).items()
                    if name in DURABLE_METHODS
                    and inspect.isfunction(function)
                    and not getattr(function, "__isabstractmethod__", False)
                ]
    unnamed = {
        ids.module_path_name(target)
        for target in (getattr(f, "func", f) for f in durable)
        if not hasattr(target, ids.DURABLE_NAME_ATTR) and _private(ids.function_id(target))
    }
    assert not unnamed, f"named by a private module path, without a frozen name: {unnamed}"
    checked = {ids.function_id(f) for f in durable}
    assert checked >= FROZEN_NAMES


def test_the_durable_calls_of_ours_are_the_known_ones():
    """A new ``durable_execute`` call in flink_agents is looked at here: if it reaches a
    function of ours in a private module, that function needs a ``durable_name``."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("durable_execute", "durable_execute_async")
                and node.args
            ):
                found.setdefault(str(path.relative_to(PACKAGE)), []).append(
                    ast.unparse(node.args[0])
                )
    assert found == DURABLE_CALL_SITES


def test_a_frozen_name_outlives_a_move():
    """What ``function_id`` answers for a frozen function: its name, whatever its module,
    also as a bound method or a partial; a function without one by its module path."""

    @ids.durable_name("flink_agents.old._place:moved")
    def moved() -> None: ...

    moved.__module__ = "flink_agents.new_place"
    assert ids.function_id(moved) == "flink_agents.old._place:moved"
    assert ids.function_id(partial(moved, 1)) == "flink_agents.old._place:moved"
    model = OpenAIChatModel(model="m", base_url="http://localhost:1", api_key="k")
    assert ids.function_id(model.chat) == (
        "flink_agents.integrations.chat._openai:OpenAIChatModel.chat"
    )
    assert ids.function_id(FunctionTool(_async_tool).acall) == (
        "flink_agents.api._tools:FunctionTool._acall"
    )

    def plain() -> None: ...

    assert ids.function_id(plain) == (
        "tests.test_ids:test_a_frozen_name_outlives_a_move.<locals>.plain"
    )


async def _async_tool(text: str) -> str:
    """An async tool: ``FunctionTool.acall`` is then its ``_acall``."""
    return text
