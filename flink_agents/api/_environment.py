"""``AgentsExecutionEnvironment``: where users choose how their agents run.

This module never imports a runner: ``get_execution_environment`` loads the runner's
module by name, so ``flink_agents.api`` stays free of pyflink and of the runtime.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any

from flink_agents.api._errors import FlinkAgentsError

KeySelector = Callable[[Any], Any] | str | None

_LOCAL_RUNNER = ("flink_agents.runtime", "LocalExecutionEnvironment")
_FLINK_RUNNER = ("flink_agents.runtime.flink", "FlinkExecutionEnvironment")


class AgentBuilder(ABC):
    """An input bound to an environment; ``apply`` an agent, then take its outputs."""

    @abstractmethod
    def apply(self, agent: Any) -> AgentBuilder:
        """Run ``agent`` (an ``Agent`` class or instance, an ``AgentPlan``, or a plan file)."""

    def to_list(self) -> list[Any]:
        """Run to completion and return the output payloads in order (local runner)."""
        raise FlinkAgentsError(f"{type(self).__name__} does not produce a list")

    def to_datastream(self) -> Any:
        """The outputs as a Flink DataStream (Flink runner)."""
        raise FlinkAgentsError(f"{type(self).__name__} does not produce a DataStream")

    def to_table(self, schema: Any = None, output_type: Any = None) -> Any:
        """The outputs as a Flink ``Table``, one row per ``OutputEvent`` payload, of the
        declared ``schema`` (a pydantic model class, a row type or a ``Schema``; with
        ``output_type``, a ``RowTypeInfo``). Payloads that do not fit it go to
        ``error_stream()`` as ``rejected_output`` records (Flink runner)."""
        raise FlinkAgentsError(
            f"{type(self).__name__} does not produce a Table: to_table needs the Flink runner"
        )

    def with_signals(
        self, signals: Any, key_selector: Any = None, event_type: type | None = None
    ) -> AgentBuilder:
        """A second input of signals for the agent's keys: runs waiting for one
        (``ctx.wait_for``) take it as their answer; a signal no run waits for starts a run
        of the actions that listen to its type. ``signals``: a DataStream or a ``Table`` on
        Flink, a list on the local runner (fed after the input's records); each record an
        ``Event``, or with ``event_type`` a mapping of its fields (a table's row);
        ``key_selector`` as for the input. A record that is neither, or whose key cannot be
        taken, goes to ``error_stream()`` (``kind: rejected``). Returns this builder."""
        raise FlinkAgentsError(f"{type(self).__name__} takes no signals")

    @abstractmethod
    def error_stream(self) -> Any:
        """The error output: input that never reached the agent (``kind: rejected``, with
        its ``reason``: a record whose key cannot be taken) and runs given up under the
        ``error-output`` or ``retry`` policy (``kind: failed_run``). A list of dicts on the
        local runner, a DataStream of dicts on Flink; the same records in both."""


class AgentsExecutionEnvironment(ABC):
    """Entry point for running agents, locally or on Flink."""

    @staticmethod
    def get_execution_environment(
        env: Any = None, t_env: Any = None, **options: Any
    ) -> AgentsExecutionEnvironment:
        """The local runner when ``env`` is None, else the Flink runner on ``env`` (a
        ``StreamExecutionEnvironment``). ``t_env`` is the job's ``StreamTableEnvironment``
        (created over ``env``) for ``from_table`` and ``to_table``; without it, they use
        the table's own environment, or one created over ``env``.

        On Flink, this sets PyFlink's thread mode on ``env`` unless the job chose an
        execution mode itself. PyFlink fixes a Python operator's mode when the operator is
        created, so call this before building Python operators of your own (those built
        earlier run in process mode)."""
        if env is None and t_env is not None:
            raise FlinkAgentsError(
                "t_env needs env: pass the StreamExecutionEnvironment the table environment "
                "was created over, get_execution_environment(env, t_env)"
            )
        module_name, class_name = _LOCAL_RUNNER if env is None else _FLINK_RUNNER
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name != module_name:
                raise
            raise FlinkAgentsError(
                f"this installation has no runner module {module_name!r}"
            ) from error
        environment_class = getattr(module, class_name)
        if env is None:
            return environment_class(**options)
        return environment_class(env, t_env=t_env, **options)

    @abstractmethod
    def from_list(self, records: Iterable[Any], key_selector: KeySelector = None) -> AgentBuilder:
        """Use ``records`` as the input, partitioned by ``key_selector``.

        ``key_selector`` is a function of the record, the name of a field of the record,
        or None to run every record under the single key None.
        """

    def from_datastream(self, stream: Any, key_selector: KeySelector = None) -> AgentBuilder:
        """Use a Flink DataStream as the input (Flink runner only)."""
        raise FlinkAgentsError(f"{type(self).__name__} cannot read a DataStream")

    def from_table(self, table: Any, key_selector: KeySelector = None) -> AgentBuilder:
        """Use an insert-only Flink ``Table`` as the input, each row a dict of column ->
        value, partitioned by ``key_selector`` (a function of the dict, a column name, or
        None) (Flink runner only)."""
        raise FlinkAgentsError(f"{type(self).__name__} cannot read a Table")
