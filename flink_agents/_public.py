"""Classes of ours name themselves by the public package that exports them.

Pickle finds a class by its ``__module__`` and ``__qualname__``. Instances of our classes are
kept in Flink state and in the action log (events, chat messages, memory markers, recorded
errors) and must read back after we move the private module that defines them, so a
package's ``__init__`` calls ``name_by_package`` on what it exports: their pickles (and
``repr``s and plan references) then name only the public package, whose exports are the
compatibility promise (``docs/upgrading.md``). Old pickles that name a private module
still load while that module exists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

DEFINED_IN: dict[type, str] = {}
"""The module that defines each class renamed here: argument digests of recorded calls
(``flink_agents._ids.digest_args``, scheme ``call-arguments`` 1) name a class by it, as they
did before classes were renamed, so that calls recorded then still match."""


def name_by_package(package: str, namespace: Mapping[str, Any], names: Iterable[str]) -> None:
    """Set ``__module__`` to ``package`` for each class among ``names`` (in ``namespace``,
    the package's globals) that one of the package's private modules defines."""
    private = package + "._"
    for name in names:
        value = namespace.get(name)  # (a lazily imported name is not there yet)
        if isinstance(value, type) and value.__module__.startswith(private):
            DEFINED_IN[value] = value.__module__
            value.__module__ = package
