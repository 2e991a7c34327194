"""Package attributes imported on first use (PEP 562), for packages a Flink operator imports:
every module it does not need costs the job's start-up (``bench/RESULTS.md``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(namespace: dict[str, Any], modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` importing ``name`` from ``modules[name]`` when first asked
    for, then keeping it in ``namespace`` (the package's ``globals()``)."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
