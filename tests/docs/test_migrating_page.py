"""docs/migrating.md: its examples run as written, and its tables of Apache Flink Agents'
names say truly which of them this package provides."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from typing import Any

import pytest

from flink_agents.api.resource import ResourceName
from flink_agents.testing import clean_environment
from flink_agents.testing.llm_server import Rule, ScriptedLLMServer
from tests.docs.pages import DOCS, run_first_example

PAGE = (DOCS / "migrating.md").read_text()

THEIR_MODULES = frozenset(
    {
        "flink_agents.api",
        "flink_agents.api.agents",
        "flink_agents.api.agents.agent",
        "flink_agents.api.agents.react_agent",
        "flink_agents.api.agents.types",
        "flink_agents.api.chat_message",
        "flink_agents.api.chat_models",
        "flink_agents.api.chat_models.chat_model",
        "flink_agents.api.chat_models.java_chat_model",
        "flink_agents.api.configuration",
        "flink_agents.api.core_options",
        "flink_agents.api.decorators",
        "flink_agents.api.embedding_models",
        "flink_agents.api.embedding_models.embedding_model",
        "flink_agents.api.embedding_models.java_embedding_model",
        "flink_agents.api.events",
        "flink_agents.api.events.chat_event",
        "flink_agents.api.events.context_retrieval_event",
        "flink_agents.api.events.event",
        "flink_agents.api.events.tool_event",
        "flink_agents.api.execution_environment",
        "flink_agents.api.memory",
        "flink_agents.api.memory.long_term_memory",
        "flink_agents.api.memory_object",
        "flink_agents.api.memory_reference",
        "flink_agents.api.metric_group",
        "flink_agents.api.prompts",
        "flink_agents.api.prompts.prompt",
        "flink_agents.api.prompts.utils",
        "flink_agents.api.resource",
        "flink_agents.api.runner_context",
        "flink_agents.api.tools",
        "flink_agents.api.tools.tool",
        "flink_agents.api.tools.utils",
        "flink_agents.api.vector_stores",
        "flink_agents.api.vector_stores.java_vector_store",
        "flink_agents.api.vector_stores.vector_store",
        "flink_agents.api.version_compatibility",
    }
)
"""The modules of Apache Flink Agents' Python API at release 0.2.1 (``python/flink_agents/api``,
tests left out): the page's table of modules must name each of them."""

THEIR_PACKAGES = frozenset(
    m for m in THEIR_MODULES if any(other.startswith(m + ".") for other in THEIR_MODULES)
)
"""Their packages, whose ``__init__`` defines no names: they have no table of names."""

NOT_PROVIDED = "**not provided**"
_ROW = re.compile(r"^\| `([\w.]+)` \| (.+) \|$", re.M)


def _names_part() -> str:
    start = PAGE.index("## Every name of theirs")
    return PAGE[start : PAGE.index("## Behavioural differences", start)]


def _module_rows() -> dict[str, str]:
    part = _names_part()
    table = part[part.index("### Modules") :]
    table = table[: table.index("\n### ", 1)]
    return dict(_ROW.findall(table))


def _name_rows() -> list[tuple[str, str, str]]:
    """(module, dotted name, what the page says) for every row under a module's heading."""
    rows = []
    for section in re.split(r"^### ", _names_part(), flags=re.M)[1:]:
        heading = re.match(r"`([\w.]+)`\n", section)
        if heading is None:
            continue  # the table of modules
        rows += [(heading.group(1), name, here) for name, here in _ROW.findall(section)]
    return rows


def _resolve(module: str, dotted: str) -> Any:
    """``module``'s ``dotted`` name, a pydantic model's fields included."""
    target: Any = importlib.import_module(module)
    for part in dotted.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            fields = getattr(target, "model_fields", None)
            if not isinstance(fields, dict) or part not in fields:
                raise
            target = fields[part]
    return target


def _constants(holder: type, prefix: str) -> list[str]:
    found = []
    for name, value in vars(holder).items():
        if name.startswith("_"):
            continue
        if isinstance(value, str):
            found.append(f"{prefix}.{name}")
        elif isinstance(value, type):
            found += _constants(value, f"{prefix}.{name}")
    return found


def test_the_first_example_prints_the_lines_the_page_shows(tmp_path):
    printed, shown = run_first_example("migrating.md", tmp_path, "visits.py")
    assert len(shown) == 3
    assert printed == shown


def test_the_string_typed_example_prints_the_lines_the_page_shows(tmp_path):
    printed, shown = run_first_example("migrating.md", tmp_path, "shouter.py", index=1)
    assert len(shown) == 1
    assert printed == shown


def test_the_ollama_example_runs_against_the_stand_in_in_place_of_ollama(tmp_path):
    code = re.findall(r"```python\n(.*?)```", PAGE, re.S)[2]
    assert code.count("http://localhost:11434") == 1
    rules = [
        Rule(last_user_contains="crushed", reply_text='<think>a box</think>{"score": 2}'),
        Rule(reply_text='{"score": 5}'),
    ]
    with ScriptedLLMServer(rules) as stand_in:
        root = stand_in.base_url.removesuffix("/v1")  # Ollama's root; the page adds /v1
        script = tmp_path / "rater.py"
        script.write_text(code.replace("http://localhost:11434", root))
        env = {**clean_environment(), "FLINK_AGENTS_DATA_DIR": str(tmp_path / "data")}
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120
        )
        calls = [call.request for call in stand_in.calls]
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["{'p1': 2}", "{'p2': 5}"]
    assert {call["model"] for call in calls} == {"qwen3:8b"}
    [crushed] = [call["messages"] for call in calls if "crushed" in str(call["messages"])]
    system, user = crushed
    assert system["content"] == 'Rate the review from 1 to 5. Answer in JSON: {"score": <n>}'
    assert user == {"role": "user", "content": "Arrived crushed, but it works."}


@pytest.mark.flink
def test_the_flink_example_prints_the_greetings_its_comment_shows(tmp_path):
    code = re.findall(r"```python\n(.*?)```", PAGE, re.S)[3]
    shown = re.search(r"outputs\.print\(\)  # (.*)$", code, re.M).group(1).split(", ")
    script = tmp_path / "greeter.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=clean_environment(),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    printed = [
        re.sub(r"^\d+> ", "", line)
        for line in (done.stdout + done.stderr).splitlines()
        if "hello " in line
    ]
    assert sorted(printed) == sorted(shown)
    assert printed.index("hello ana #1") < printed.index("hello ana #2")


def test_the_table_of_modules_names_every_module_of_their_api():
    assert set(_module_rows()) == THEIR_MODULES


def test_modules_marked_provided_import_and_the_others_do_not():
    for module, here in _module_rows().items():
        if here.startswith(NOT_PROVIDED):
            with pytest.raises(ImportError):
                importlib.import_module(module)
        else:
            assert here.startswith("provided"), module
            importlib.import_module(module)


def test_every_module_of_theirs_but_the_packages_has_a_table_of_names():
    assert {module for module, _, _ in _name_rows()} == THEIR_MODULES - THEIR_PACKAGES


def test_names_marked_provided_resolve():
    provided = [(m, n) for m, n, here in _name_rows() if not here.startswith(NOT_PROVIDED)]
    assert len(provided) > 90  # the parser found the tables
    for module, name in provided:
        assert _resolve(module, name) is not None, f"{module}.{name}"


def test_names_marked_not_provided_are_missing():
    missing = [(m, n) for m, n, here in _name_rows() if here.startswith(NOT_PROVIDED)]
    assert len(missing) > 20  # the parser found the tables
    for module, name in missing:
        with pytest.raises((ImportError, AttributeError)):
            _resolve(module, name)


def test_every_resource_name_constant_has_a_row():
    listed = {name for module, name, _ in _name_rows() if module == "flink_agents.api.resource"}
    constants = _constants(ResourceName, "ResourceName")
    assert len(constants) == 33
    assert set(constants) <= listed


def test_the_chat_model_written_their_way_prints_the_lines_the_page_shows(tmp_path):
    printed, shown = run_first_example("migrating.md", tmp_path, "stock.py", index=4)
    assert len(shown) == 2
    assert printed == shown
