"""Every id scheme in ``flink_agents._ids`` against golden values, and no id minted elsewhere.

The golden values were computed by the code before the schemes moved into one module (main at
d2e56d1): ids are persisted in Flink state, action logs, vector stores and users' systems, so
a value here never changes under its scheme's version. A new derivation is a new version with
new golden values beside these.
"""

from __future__ import annotations

import ast
import decimal
import uuid
from pathlib import Path

from flink_agents import _ids as ids
from flink_agents.api import ChatMessage

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
