"""Resolving ``module:qualname`` references to live objects, and writing them.

The one implementation for every layer: plans name actions, resources and event types this
way, and resources configured in code (tools, output schemas) describe themselves with it.
It lives in ``api`` because that is the lowest layer; ``flink_agents.plan`` re-exports it.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from flink_agents.api._errors import FlinkAgentsError


class RefError(FlinkAgentsError):
    """A reference cannot be resolved; the message says why, without the location."""


def import_ref(ref: str) -> Any:
    """The object named by ``module:qualname``."""
    module_name, sep, qualname = ref.partition(":")
    if not sep or not module_name or not qualname:
        raise RefError(f"{ref!r} is not a reference: write it as 'package.module:name'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise RefError(f"cannot import {ref!r}: no module named {error.name!r}") from error
    except Exception as error:
        raise RefError(
            f"cannot import {ref!r}: importing {module_name!r} raised "
            f"{type(error).__name__}: {error}"
        ) from error
    target: Any = module
    walked = module_name
    for part in qualname.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise RefError(f"cannot import {ref!r}: {walked!r} has no attribute {part!r}") from None
        walked = f"{walked}.{part}" if walked != module_name else f"{module_name}:{part}"
    return target


def ref_of(obj: Any) -> str:
    """The ``module:qualname`` of a module-level function or class.

    An object of flink_agents defined in a private module (``flink_agents.api._tools``) is
    named through the public package that exports it (``flink_agents.api:Tool.from_ref``),
    so a plan holds no module path that a reorganisation inside a package may move. One that
    package does not export keeps its own module's name.

    Raises:
        RefError: ``obj`` is defined inside a function and cannot be found by name.
    """
    qualname = getattr(obj, "__qualname__", None)
    module = getattr(obj, "__module__", None)
    if not qualname or not module:
        raise RefError(f"{obj!r} has no module-level name")
    if "<locals>" in qualname:
        raise RefError(
            f"{module}:{qualname} is defined inside a function; plans refer to code by "
            "module:qualname, so define it at module level"
        )
    if module.startswith("flink_agents."):
        return _public_ref(obj, module, qualname)
    return f"{module}:{qualname}"


def _public_ref(obj: Any, module: str, qualname: str) -> str:
    """``obj``'s reference through the package above ``module``'s first private part, if
    that package exports it (the name walked from there is ``obj``), else its own."""
    parts = module.split(".")
    private = next((i for i, part in enumerate(parts) if part.startswith("_")), None)
    package = sys.modules.get(".".join(parts[:private])) if private else None
    target: Any = package
    for name in qualname.split("."):
        target = getattr(target, name, None)
    if package is None or target is None or target != obj:
        return f"{module}:{qualname}"
    return f"{package.__name__}:{qualname}"
