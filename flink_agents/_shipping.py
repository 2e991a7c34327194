"""Shipping our operators to PyFlink workers without import deadlocks.

A PyFlink Python worker builds the operators of a job on several threads at once (one per
bundle processor), and each unpickles its functions, which imports their modules. After a
restore all of them start together. Two threads importing sibling modules of a package whose
``__init__`` imports those siblings take the module locks in opposite orders, and CPython
raises ``_DeadlockError``: the job fails on every restart and never recovers.

Everything this package ships (the dispatcher, the record parser, key selectors, sink
formatters) therefore pickles as a call to ``load`` or ``rebuild`` here. This module imports
nothing of ours at import time, and both functions import under one process-wide lock, so
in a worker our modules are only ever imported by one thread at a time. ``import_lock``
guards the other imports a worker makes of user code (binding a plan).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import_lock = threading.RLock()
"""Held while a worker imports our modules or the modules a plan names."""


def load(module: str, qualname: str) -> Any:
    """The object ``module:qualname``, imported under ``import_lock``."""
    with import_lock:
        # Imported here, under the lock: this module itself must import nothing of ours.
        from flink_agents.api.internal import import_ref

        return import_ref(f"{module}:{qualname}")


def rebuild(module: str, qualname: str, state: dict[str, Any]) -> Any:
    """An instance of the class ``module:qualname`` with ``state`` as its attributes."""
    cls = load(module, qualname)
    instance = cls.__new__(cls)
    instance.__dict__.update(state)
    return instance


class ShippedByName:
    """Mixin: instances pickle as ``rebuild(their class, their __dict__)``."""

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        cls = type(self)
        return rebuild, (cls.__module__, cls.__qualname__, dict(self.__dict__))


class ShippedFunction:
    """A module-level function that pickles as ``load(its module, its name)``: the worker
    receives the function itself. Calling the wrapper calls the function."""

    __slots__ = ("function",)

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[str, str]]:
        return load, (self.function.__module__, self.function.__qualname__)
