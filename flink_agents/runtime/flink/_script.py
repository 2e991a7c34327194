"""Code defined in the job's own script, shipped to Flink's workers by value.

A plan names code as ``module:qualname``. An agent defined in the script that builds the job
(``python my_job.py``, ``flink run -py my_job.py``) is named ``__main__:Echo.echo``, and a
worker's ``__main__`` is not that script: in thread mode it is the JVM's embedded
interpreter, on a cluster a Beam worker. PyFlink ships its own functions from the script by
value (cloudpickle); this module does the same for what a plan names in ``__main__``.

On the client, ``ScriptCode.of(plan)`` pickles by value the objects of ``__main__`` that the
plan names (actions' agents, event types, resource providers, tools, sub-agents: any
``__main__:`` reference in the plan) together with every other class the script defines (the
events an action sends without listening to them, models kept in memory): all in one pickle,
so that an action's function and the event classes it sends are the same objects in the
worker. It fails there, at ``apply()``, when something the plan names cannot be pickled.

In the worker, ``ScriptCode.install()`` defines those names in that interpreter's
``__main__`` before the plan is bound, so ``__main__:Echo.echo`` resolves and instances of
the script's classes pickle by reference (Flink state, the action log) as they do in the
client. A name ``__main__`` already has and that this module did not define is left alone:
a local job in process mode runs its workers in the client's own process, whose
``__main__`` is the script itself.

Two jobs in one TaskManager whose scripts define different classes under one name share
that name in the worker's ``__main__``: each job binds its plan to its own objects, but the
state read after a restore resolves the name to the job shipped last. Define such agents in
modules of their own.
"""

from __future__ import annotations

import pickle
import re
import sys
from dataclasses import dataclass
from typing import Any

import cloudpickle

from flink_agents._shipping import ShippedByName
from flink_agents.api import FlinkAgentsError
from flink_agents.plan import AgentPlan, bind_plan

_MAIN_REF = re.compile(r"__main__:([A-Za-z_]\w*)")
"""A reference into ``__main__`` anywhere in a plan's JSON; the group is its top-level name."""

_INSTALLED = "__flink_agents_shipped__"
"""The attribute of a worker's ``__main__`` listing the names this module defined there."""


@dataclass(frozen=True)
class ScriptCode(ShippedByName):
    """The job script's objects that a plan needs, pickled by value (``payload``), and the
    names of them the plan refers to (``names``). Install it in the worker under
    ``flink_agents._shipping.import_lock``: unpickling imports what the objects use."""

    payload: bytes
    names: tuple[str, ...]

    @classmethod
    def of(cls, plan: AgentPlan) -> ScriptCode | None:
        """What ``plan`` needs of the client's ``__main__``, or None when it names nothing
        there.

        Raises:
            PlanError: the plan names something ``__main__`` does not have.
            FlinkAgentsError: something the plan names cannot be pickled.
        """
        names = tuple(dict.fromkeys(_MAIN_REF.findall(plan.to_json())))
        if not names:
            return None
        bind_plan(plan)  # every reference resolves here, or the PlanError says which not
        main = sys.modules["__main__"]
        objects = {name: getattr(main, name) for name in names}
        for name, value in vars(main).items():
            if name not in objects and _defined_in_script(value) and _picklable(value):
                objects[name] = value
        try:
            payload = cloudpickle.dumps(objects, protocol=pickle.DEFAULT_PROTOCOL)
        except Exception as error:
            culprit = next((n for n in names if not _picklable(objects[n])), None)
            raise FlinkAgentsError(_cannot_ship(culprit or ", ".join(names), error)) from None
        return cls(payload, names)

    def install(self) -> None:
        """Define the shipped names in this interpreter's ``__main__`` (see the module)."""
        main = sys.modules["__main__"]
        ours: set[str] = getattr(main, _INSTALLED, set())
        for name, value in pickle.loads(self.payload).items():
            if name in ours or not hasattr(main, name):
                setattr(main, name, value)
                ours.add(name)
        setattr(main, _INSTALLED, ours)


def _defined_in_script(value: Any) -> bool:
    """A class the script defines (not one it imports)."""
    return isinstance(value, type) and value.__module__ == "__main__"


def _picklable(value: Any) -> bool:
    try:
        cloudpickle.dumps(value, protocol=pickle.DEFAULT_PROTOCOL)
    except Exception:
        return False
    return True


def _cannot_ship(name: str, error: BaseException) -> str:
    return (
        f"cannot ship {name!r}, defined in the job's script, to Flink's workers: it does not "
        f"pickle ({type(error).__name__}: {error}). Move it into a module of its own beside "
        "the script and import it from there, or keep what does not pickle (clients, locks, "
        "open files) out of the class and create it in a resource provider"
    )
