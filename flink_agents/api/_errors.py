"""Public error types: what user code may catch, raised with the exact place of the problem."""

from __future__ import annotations

from typing import Any


class FlinkAgentsError(Exception):
    """Base class of every error this framework raises on purpose."""


class MemoryPathError(FlinkAgentsError, ValueError):
    """A memory path is malformed, or goes through a field that holds a plain value."""


class MemoryValueError(FlinkAgentsError, TypeError):
    """A value cannot be stored in sensory or short-term memory."""


class WaitTimedOut(FlinkAgentsError, TimeoutError):
    """``ctx.wait_for(..., raise_on_timeout=True)``: no signal came before the timeout."""


class PlanError(FlinkAgentsError, ValueError):
    """An agent plan is invalid; the message names the file, agent, action and field.

    Attributes:
        file: the plan file, or None for a plan built in code.
        agent: the agent's name, when known.
        action: the action's name (or position), when the problem is inside one.
        field: the offending field, e.g. ``function`` or ``listen_to[1]``.
        reason: what is wrong, without the location.
    """

    def __init__(
        self,
        reason: str,
        *,
        file: str | None = None,
        agent: str | None = None,
        action: str | None = None,
        resource: str | None = None,
        field: str | None = None,
    ) -> None:
        self.reason = reason
        self.file = file
        self.agent = agent
        self.action = action
        self.resource = resource
        self.field = field
        super().__init__(self._render())

    def _render(self) -> str:
        place = []
        if self.agent is not None:
            place.append(f"agent '{self.agent}'")
        if self.action is not None:
            place.append(f"action '{self.action}'")
        if self.resource is not None:
            place.append(f"resource '{self.resource}'")
        if self.field is not None:
            place.append(f"field '{self.field}'")
        where = ", ".join(place)
        prefix = f"{self.file}: " if self.file else ""
        return f"{prefix}{where}: {self.reason}" if where else f"{prefix}{self.reason}"

    def __reduce__(self) -> tuple[Any, ...]:
        place = {
            "file": self.file,
            "agent": self.agent,
            "action": self.action,
            "resource": self.resource,
            "field": self.field,
        }
        return (_rebuild, (PlanError, (self.reason,), place))

    def located(self, file: str) -> PlanError:
        """The same error, attributed to a plan file."""
        return PlanError(
            self.reason,
            file=file,
            agent=self.agent,
            action=self.action,
            resource=self.resource,
            field=self.field,
        )


class ActionExecutionError(FlinkAgentsError):
    """An action raised; its memory writes and events were discarded.

    Attributes:
        key: the key whose run failed.
        action: the name of the action that raised.
        input: the input record of the run.
        run_sequence: the run's number within its key (1 for the first run).
    """

    def __init__(
        self, *, key: Any, action: str, input: Any, run_sequence: int, cause: BaseException
    ) -> None:
        self.key = key
        self.action = action
        self.input = input
        self.run_sequence = run_sequence
        self.cause = cause
        shown = repr(input)
        if len(shown) > 300:
            shown = shown[:297] + "..."
        super().__init__(
            f"action '{action}' failed for key {key!r} (run {run_sequence}, input {shown}): "
            f"{type(cause).__name__}: {cause}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        fields = {
            "key": self.key,
            "action": self.action,
            "input": self.input,
            "run_sequence": self.run_sequence,
            "cause": self.cause,
        }
        return (_rebuild, (ActionExecutionError, (), fields))


def _rebuild(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Exception:
    """Unpickling helper: errors with keyword arguments survive crossing processes."""
    return cls(*args, **kwargs)
