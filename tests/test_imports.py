"""Packages of flink_agents import one another's public names only.

A private component of a dotted path (one that starts with ``_``; dunders such as
``__init__`` aside) is a module or a name private to the package that holds it: the nearest
package on the path before it (``flink_agents.runtime._engine`` and
``flink_agents.api.internal._x`` are private to ``flink_agents.runtime`` and
``flink_agents.api``). Only modules of that package and of its subpackages may import it:

- ``flink_agents/runtime/flink/_dispatcher.py`` may import ``flink_agents.runtime._engine``
  (a subpackage is part of its parent) and anything may import ``flink_agents._lazy``;
- ``flink_agents/runtime/_engine.py`` may import neither ``flink_agents.runtime.action_log._ids``
  (a package uses its subpackages through their facades) nor ``flink_agents.memory._identity``;
- ``flink_agents/agents/x.py`` may not import ``flink_agents.api._events``.

What a package offers the others is its ``__init__``'s names and, for names that are not for
users, its ``internal`` module (``docs/architecture.md``, "Packages and their facades").

Every form is checked: ``import a._b``, ``from a._b import x``, ``from a import _b``,
relative imports, and imports inside functions, in ``flink_agents/``, ``bench/`` and ``jobs/``
(which hold no package of ours, so they import public names only) and in ``tests/``.

A test may open up the package its directory mirrors (``tests/runtime/`` stands for
``flink_agents.runtime``), that package's subpackages too, since ``tests/`` is flatter than
the package tree (``tests/integrations/`` tests chat, embeddings and MCP alike), and its
ancestors: a white-box test of the engine lives under ``tests/runtime/``. ``WHITE_BOX`` lists
the tests that still reach into a package they are not filed under.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIBRARY, TESTS = REPO / "flink_agents", REPO / "tests"
OUTSIDE = (REPO / "bench", REPO / "jobs")

WHITE_BOX = {
    "tests/integrations/mcp/test_mcp.py": {"flink_agents.runtime._resources"},
    "tests/integrations/rag/test_load_knowledge.py": {
        "flink_agents.runtime._long_term",
        "flink_agents.runtime._resources",
    },
    "tests/integrations/test_chat_model.py": {"flink_agents.runtime._call_loop"},
    "tests/integrations/test_resources.py": {"flink_agents.runtime._resources"},
    "tests/integrations/test_tools_prompts.py": {"flink_agents.api._tools"},
    "tests/security/test_flink_logs.py": {"flink_agents.runtime.flink._logging"},
}
"""Tests filed under one package's directory that test another package's private parts.
The list only shrinks: move such a test under the package it tests, or let it use that
package's public names, and take its line out."""


def _is_private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _is_package(dotted: list[str]) -> bool:
    return (REPO.joinpath(*dotted) / "__init__.py").is_file()


def _within(package: str, ancestor: str) -> bool:
    return package == ancestor or package.startswith(ancestor + ".")


def _imported_paths(tree: ast.AST, package: str) -> list[tuple[int, str]]:
    """Every dotted path ``tree`` imports, with its line: for ``from m import a, b`` that is
    ``m``, ``m.a`` and ``m.b`` (either may be a module); relative imports resolved against
    ``package``, the importing module's own package."""
    paths = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            paths.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, *([module] if module else [])])
            paths.append((node.lineno, module))
            paths.extend((node.lineno, f"{module}.{alias.name}") for alias in node.names)
    return paths


def private_imports(
    tree: ast.AST, package: str, mirrors: str | None = None
) -> list[tuple[int, str]]:
    """The imports in ``tree``, a module of ``package``, of a module or name private to
    another package: ``(line, path up to its private component)``, once each.

    A test passes the package its directory ``mirrors``, which it may open up with that
    package's subpackages and ancestors (see the module docstring)."""
    found: list[tuple[int, str]] = []
    for line, path in _imported_paths(tree, package):
        parts = path.split(".")
        if parts[0] != "flink_agents":
            continue
        private = next((i for i, part in enumerate(parts) if _is_private(part)), None)
        if private is None:
            continue
        owner = parts[:private]
        while len(owner) > 1 and not _is_package(owner):
            owner.pop()
        owner_name = ".".join(owner)
        if mirrors is None and _within(package, owner_name):
            continue
        if mirrors is not None and (_within(mirrors, owner_name) or _within(owner_name, mirrors)):
            continue
        entry = (line, ".".join(parts[: private + 1]))
        if entry not in found:
            found.append(entry)
    return found


def _offences(root: Path) -> list[tuple[str, int, str]]:
    """``(file, line, private path)`` for every offending import under ``root``."""
    offences = []
    for path in sorted(root.rglob("*.py")):
        package = [root.name, *path.parent.relative_to(root).parts]
        mirrors = ".".join(["flink_agents", *package[1:]]) if root == TESTS else None
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        name = path.relative_to(REPO).as_posix()
        offences.extend(
            (name, line, private)
            for line, private in private_imports(tree, ".".join(package), mirrors)
        )
    return offences


def _listed(offences: list[tuple[str, int, str]]) -> str:
    return f"{len(offences)} imports reach into another package's private parts:\n" + "\n".join(
        f"{name}:{line}: {private}" for name, line, private in offences
    )


@pytest.mark.parametrize("root", [LIBRARY, *OUTSIDE], ids=lambda root: root.name)
def test_code_imports_other_packages_public_names_only(root):
    offences = _offences(root)
    assert not offences, _listed(offences)


def test_tests_open_up_only_the_package_they_are_filed_under():
    offences = _offences(TESTS)
    unlisted = [o for o in offences if o[2] not in WHITE_BOX.get(o[0], ())]
    assert not unlisted, _listed(unlisted)
    stale = {(name, p) for name, ps in WHITE_BOX.items() for p in ps} - {
        (name, private) for name, _, private in offences
    }
    assert not stale, f"no longer imported, take out of WHITE_BOX: {sorted(stale)}"


CASES = [
    # the importing module's package, its source, what the check reports
    ("flink_agents.runtime.flink", "from flink_agents.runtime._engine import RunEngine", []),
    ("flink_agents.runtime.flink", "from ..._lazy import lazy_attributes", []),
    ("flink_agents.cli", "from flink_agents.cli import _log\nimport flink_agents.__main__", []),
    ("flink_agents.agents", "from flink_agents.api.internal import awaited", []),
    (
        "flink_agents.runtime",
        "from .action_log._ids import NAMESPACE",
        [(1, "flink_agents.runtime.action_log._ids")],
    ),
    (
        "flink_agents.runtime",
        "import flink_agents.memory._identity",
        [(1, "flink_agents.memory._identity")],
    ),
    (
        "flink_agents.runtime",
        "from flink_agents.memory import _identity",
        [(1, "flink_agents.memory._identity")],
    ),
    ("flink_agents.agents", "from ..api._events import Event", [(1, "flink_agents.api._events")]),
    (
        "flink_agents.agents",
        "from flink_agents.api import Event, _events",
        [(1, "flink_agents.api._events")],
    ),
    (
        "flink_agents.agents",
        "from flink_agents.api.internal import _hidden",
        [(1, "flink_agents.api.internal._hidden")],
    ),
    (
        "flink_agents.agents",
        "def f():\n    from flink_agents.plan._refs import ref_of",
        [(2, "flink_agents.plan._refs")],
    ),
    ("bench", "from flink_agents._lazy import lazy_attributes", [(1, "flink_agents._lazy")]),
]


@pytest.mark.parametrize(("package", "source", "expected"), CASES)
def test_the_check_sees_each_form_of_import(package, source, expected):
    assert private_imports(ast.parse(source), package) == expected


def test_a_test_opens_up_the_package_it_mirrors_with_its_subpackages_and_ancestors():
    source = ast.parse(
        "from flink_agents.runtime._driver import KeyDriver\n"
        "from flink_agents.runtime.flink._metrics import FlinkMetricsMirror\n"
        "from flink_agents._shipping import ShippedFunction\n"
        "from .helpers import something"
    )
    assert private_imports(source, "tests.runtime", "flink_agents.runtime") == []
    assert private_imports(source, "tests.cli", "flink_agents.cli") == [
        (1, "flink_agents.runtime._driver"),
        (2, "flink_agents.runtime.flink._metrics"),
    ]


@pytest.mark.parametrize("path", sorted(LIBRARY.rglob("internal.py")), ids=lambda p: p.parent.name)
def test_an_internal_facade_only_re_exports_its_packages_names(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(["flink_agents", *path.parent.relative_to(LIBRARY).parts])
    imported, exported = [], None
    for node in tree.body[1:]:  # after the docstring
        if isinstance(node, ast.ImportFrom) and node.module.startswith(package + "._"):
            imported.extend(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__":
            exported = ast.literal_eval(node.value)
        else:
            pytest.fail(f"{path.relative_to(REPO)}:{node.lineno} is not a re-export")
    assert isinstance(tree.body[0], ast.Expr)
    assert sorted(imported) == sorted(exported)
