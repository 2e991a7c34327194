"""The local runner: the run engine in-process, with dict-backed memory per key."""

from __future__ import annotations

import copy
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from flink_agents.api._environment import AgentBuilder, AgentsExecutionEnvironment, KeySelector
from flink_agents.api._errors import ActionExecutionError, FlinkAgentsError
from flink_agents.memory import DictState, FlatMemory, to_dict
from flink_agents.plan import AgentPlan, bind_plan, to_plan
from flink_agents.runtime._engine import DEFAULT_MAX_STEPS, RunEngine, RunState
from flink_agents.runtime._journal import ActionJournal
from flink_agents.runtime._keys import key_function
from flink_agents.runtime._options import AgentOptions, load_options
from flink_agents.runtime._records import BadRecord, failed_run, rejected, take_key
from flink_agents.runtime.action_log import open_action_log


@dataclass
class LocalSnapshot:
    """The local runner's state at one point: see ``LocalRunner.snapshot``."""

    sequence: dict[Any, int]
    sensory: dict[Any, DictState]
    short_term: dict[Any, DictState]


class LocalRunner:
    """Runs an agent for records handed to it one by one; runs of a key are sequential.

    Keeps what Flink would keep in keyed state: per key, the run sequence number, the
    sensory memory map (cleared at the end of each run) and the short-term memory map.
    A failed action follows ``options.error_policy`` as on Flink: ``fail`` raises,
    ``retry`` runs it again after a backoff, and a run given up goes to ``errors``.
    """

    def __init__(
        self,
        agent: Any,
        *,
        max_steps: int = DEFAULT_MAX_STEPS,
        journal: ActionJournal | None = None,
        options: AgentOptions | None = None,
    ) -> None:
        self.plan: AgentPlan = to_plan(agent)
        self.options = options or AgentOptions()
        self.engine = RunEngine(
            bind_plan(self.plan), max_steps=max_steps, journal=journal, options=options
        )
        self._sequence: dict[Any, int] = {}
        self._sensory: dict[Any, DictState] = {}
        self._short_term: dict[Any, DictState] = {}
        self.outputs_per_key: Counter[Any] = Counter()
        self.steps = 0
        self.errors: list[dict[str, Any]] = []
        """Failed runs given up under the ``error-output`` and ``retry`` policies."""

    def run(self, key: Any, record: Any) -> list[Any]:
        """One run: ``record`` as the ``InputEvent`` of ``key``; returns its outputs (those
        of a run given up under the error policy included, as on Flink).

        Raises:
            ActionExecutionError: an action raised under the ``fail`` policy; the run is
                abandoned, the memory writes of the actions that completed before it stay.
        """
        sequence = self._sequence.get(key, 0) + 1
        self._sequence[key] = sequence
        sensory = self._sensory.setdefault(key, DictState())
        short_term = self._short_term.setdefault(key, DictState())
        run = self.engine.start(key, sequence, record)
        outputs: list[Any] = []
        try:
            while not run.finished:
                try:
                    result = self.engine.step_blocking(run, sensory, short_term)
                except ActionExecutionError as error:
                    if self._retry(run, error):
                        continue
                    break
                self.steps += 1
                outputs.extend(result.outputs)
        finally:
            self.engine.end(run, sensory)
        self.outputs_per_key[key] += len(outputs)
        return outputs

    def _retry(self, run: RunState, error: ActionExecutionError) -> bool:
        """Apply the error policy to a failed action: True to run it again."""
        policy = self.options.error_policy
        if policy == "retry" and run.attempts + 1 < self.options.retry_max_attempts:
            run.attempts += 1
            time.sleep(self.options.retry_backoff_ms(run.attempts) / 1000)
            return True
        if policy == "fail":
            raise error
        attempts = run.attempts + 1
        self.errors.append(
            failed_run(run.key, run.input, run.sequence, error.action, error.cause, attempts)
        )
        return False

    def snapshot(self) -> LocalSnapshot:
        """A copy of what Flink would checkpoint: run sequences and memory maps per key."""
        return copy.deepcopy(LocalSnapshot(self._sequence, self._sensory, self._short_term))

    def restore(self, snapshot: LocalSnapshot) -> None:
        """Go back to ``snapshot``, as Flink restores state after a failure (the action log,
        outside the state, keeps what happened since)."""
        restored = copy.deepcopy(snapshot)
        self._sequence, self._sensory, self._short_term = (
            restored.sequence,
            restored.sensory,
            restored.short_term,
        )

    @property
    def keys(self) -> list[Any]:
        return list(self._sequence)

    def runs(self, key: Any) -> int:
        return self._sequence.get(key, 0)

    def short_term_memory(self, key: Any) -> dict[str, Any]:
        """A nested-dict snapshot of ``key``'s short-term memory."""
        return to_dict(FlatMemory(self._short_term.get(key, DictState())).root())

    def sensory_memory(self, key: Any) -> dict[str, Any]:
        """A snapshot of ``key``'s sensory memory (empty between runs)."""
        return to_dict(FlatMemory(self._sensory.get(key, DictState())).root())


class LocalAgentBuilder(AgentBuilder):
    """``from_list(...).apply(agent)`` on the local runner."""

    def __init__(
        self, records: Iterable[Any], key_selector: KeySelector, options: AgentOptions
    ) -> None:
        self._records = records
        self._options = options
        self._key_of = key_function(key_selector)
        self.runner: LocalRunner | None = None
        self._keyed_outputs: list[tuple[Any, Any]] | None = None
        self._errors: list[dict[str, Any]] = []
        self._failed = False

    def apply(self, agent: Any) -> LocalAgentBuilder:
        if self.runner is not None:
            raise FlinkAgentsError("an agent is already applied to this input")
        self.runner = LocalRunner(
            agent,
            max_steps=self._options.max_steps_per_run,
            journal=_journal(self._options),
            options=self._options,
        )
        return self

    def to_keyed_list(self) -> list[tuple[Any, Any]]:
        """Run every record, in order, and return ``(key, output)`` pairs."""
        if self.runner is None:
            raise FlinkAgentsError("apply(agent) before asking for outputs")
        if self._failed:
            raise FlinkAgentsError(
                "this input already ran and failed; build a new one with from_list(...)"
            )
        if self._keyed_outputs is None:
            keyed = []
            try:
                for record in self._records:
                    try:
                        key = take_key(self._key_of, record)
                    except BadRecord as error:  # bad input, whatever the error policy
                        self._errors.append(rejected(str(error), input=record))
                        continue
                    errors_before = len(self.runner.errors)
                    keyed.extend((key, output) for output in self.runner.run(key, record))
                    self._errors.extend(self.runner.errors[errors_before:])
            except Exception:
                self._failed = True
                raise
            finally:  # compactions finish and the vector store is released
                self.runner.engine.long_term.close()
            self._keyed_outputs = keyed
        return list(self._keyed_outputs)

    def to_list(self) -> list[Any]:
        return [output for _, output in self.to_keyed_list()]

    def error_stream(self) -> list[dict[str, Any]]:
        """Input that never reached the agent (``rejected``: its key could not be taken) and
        runs given up under the ``error-output`` or ``retry`` policy (``failed_run``), in
        input order, as the Flink runner's ``error_stream()`` emits them. Runs the input
        if it has not run yet."""
        self.to_keyed_list()
        return list(self._errors)


class LocalExecutionEnvironment(AgentsExecutionEnvironment):
    """Runs agents in this process, without a JVM: for trying out, tests and debugging.

    Args:
        **options: agent options, as for the Flink runner (those about Flink are ignored).
    """

    def __init__(self, **options: Any) -> None:
        self.options: AgentOptions = load_options(options)

    def from_list(self, records: Iterable[Any], key_selector: KeySelector = None) -> AgentBuilder:
        return LocalAgentBuilder(records, key_selector, self.options)


def _journal(options: AgentOptions) -> ActionJournal | None:
    """An action journal when an ``action-log`` is configured: a local run records its
    actions and durable calls, and replays them when ``action-log-job`` names an earlier run."""
    url = options.action_log_url(embedded_default=False)
    if url is None:
        return None
    return ActionJournal(
        open_action_log(url),
        options.action_log_job or uuid.uuid4().hex,
        replay=options.action_log_job is not None,
        retention_ms=options.action_log_retention_ms,
    )
