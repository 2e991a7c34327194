"""Apache Flink Agents' execution environment, over ours.

Their local environment takes ``{"key": ..., "value": ...}`` records and fills the lists
``to_list()`` returned when ``execute()`` runs; their Flink environment takes a
``KeySelector`` and ``execute()`` runs the job. Both take resources for every agent
(``add_resource``) and a configuration (``get_config()``) whose options of theirs and ours
configure the runner, and whose other keys reach actions as ``ctx.config``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from flink_agents.api import AgentsExecutionEnvironment as OurEnvironment
from flink_agents.api import FlinkAgentsError, ResourceType
from flink_agents.api.configuration import Configuration
from flink_agents.api.execution_environment import AgentBuilder, AgentsExecutionEnvironment
from flink_agents.migration._plan import with_shared
from flink_agents.runtime import AgentOptions, load_options, their_option

_OURS = {field.alias for field in AgentOptions.model_fields.values() if field.alias}


def environment(env: Any = None, t_env: Any = None, **options: Any) -> MigratingEnvironment:
    """Their ``get_execution_environment``: ours, wrapped."""
    inner = OurEnvironment.get_execution_environment(env, t_env, **options)
    return MigratingEnvironment(inner, options)


def runner_options(config: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A configuration split in two: our options (theirs translated, ``their_option``) and
    the rest, for actions' ``ctx.config``.

    Raises:
        FlinkAgentsError: a value of theirs that does not translate.
    """
    options: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, value in config.items():
        try:
            ours = their_option(key, value)
        except ValueError as error:
            raise FlinkAgentsError(f"agent option {key!r} = {value!r}: {error}") from None
        if ours is not None:
            for name, translated in ours.items():
                options.setdefault(name, translated)
        elif key.replace("_", "-") in _OURS:
            options[key.replace("_", "-")] = value
        else:
            rest[key] = value
    return options, rest


class MigratingEnvironment(AgentsExecutionEnvironment):
    """Their environment's methods, over ``inner`` (ours)."""

    def __init__(self, inner: OurEnvironment, options: Mapping[str, Any]) -> None:
        self.inner = inner
        self._given = dict(options)
        self._resources: dict[ResourceType, dict[str, Any]] = {kind: {} for kind in ResourceType}
        self._config = Configuration()
        self._builders: list[MigratingBuilder] = []
        self._executed = False

    @property
    def resources(self) -> dict[ResourceType, dict[str, Any]]:
        return self._resources

    def get_config(self, path: str | None = None) -> Configuration:
        if path is not None:
            self._config.load_from_file(path)
        return self._config

    def add_resource(
        self, name: str, resource_type: ResourceType, instance: Any
    ) -> MigratingEnvironment:
        kind = ResourceType(resource_type)
        if name in self._resources[kind]:
            raise ValueError(f"{kind.value} {name} already defined")
        self._resources[kind][name] = instance
        return self

    def from_list(self, input: list[dict[str, Any]]) -> MigratingBuilder:
        """The local input: read when ``execute()`` runs (records appended until then
        count), one per environment as there."""
        if not hasattr(self.inner, "from_keyed_list"):
            raise MigrationUsageError(
                "from_list of key/value records runs on the local environment: "
                "get_execution_environment() without a StreamExecutionEnvironment"
            )
        if self._builders:
            raise MigrationUsageError(
                "this local environment already has its input (one from_list each, as in "
                "Apache Flink Agents); create another environment"
            )
        builder = MigratingBuilder(self, records=_KeyValues(input))
        self._builders.append(builder)
        return builder

    def from_datastream(self, input: Any, key_selector: Any = None) -> MigratingBuilder:
        inner = self.inner.from_datastream(input, _key_function(key_selector))
        return MigratingBuilder(self, inner=inner)

    def from_table(self, input: Any, key_selector: Any = None) -> MigratingBuilder:
        """A Table's rows as the input: each row a dict of column -> value for the agent;
        a ``KeySelector`` may read it as a dict or a ``Row`` (``row.id``)."""
        key_of = _key_function(key_selector)
        if key_of is not None and not isinstance(key_of, str):
            key_of = _RowKey(key_of)
        inner = self.inner.from_table(input, key_of)
        return MigratingBuilder(self, inner=inner)

    def execute(self) -> None:
        if self._executed:
            raise MigrationUsageError("this environment has already executed")
        self._executed = True
        flink_env = getattr(self.inner, "env", None)
        if flink_env is not None:
            flink_env.execute()
            return
        for builder in self._builders:
            builder.run()

    def configure(self) -> dict[str, Any]:
        """Apply the configuration to the runner; returns what goes to ``ctx.config``."""
        options, rest = runner_options(self._config)
        if options:
            self.inner.options = load_options({**self._given, **options})
        return rest


class MigratingBuilder(AgentBuilder):
    """Their builder over ours: a local input of keyed records, or a Flink one."""

    def __init__(
        self,
        environment: MigratingEnvironment,
        *,
        records: _KeyValues | None = None,
        inner: Any = None,
    ) -> None:
        self._environment = environment
        self._records = records
        self.inner = inner
        """Our builder (``error_stream()``, ``memory_stream()``, ... are there)."""
        self._outputs: list[dict[str, Any]] = []
        self._applied = False

    def apply(self, agent: Any) -> MigratingBuilder:
        if self._applied:
            raise MigrationUsageError("an agent is already applied to this input")
        self._applied = True
        config = self._environment.configure()
        plan = with_shared(agent, self._environment.resources)
        if config:
            data = plan.model_dump(mode="json")
            data["config"] = {**config, **data["config"]}
            plan = _rebound(data)
        if self._records is not None:
            self.inner = self._environment.inner.from_keyed_list(self._records)
        self.inner.apply(plan)
        return self

    def to_list(self) -> list[dict[str, Any]]:
        if self._records is None:
            raise FlinkAgentsError("to_list is for a local input (from_list)")
        return self._outputs

    def to_datastream(self) -> Any:
        return self._inner().to_datastream()

    def to_table(self, schema: Any, output_type: Any = None) -> Any:
        # Their examples wrap the row type: ExternalTypeInfo(RowTypeInfo(...)).
        output_type = getattr(output_type, "_type_info", output_type)
        return self._inner().to_table(schema, output_type)

    def run(self) -> None:
        """Run a local input; its outputs fill the list ``to_list`` returned."""
        if self.inner is None:
            return  # no agent applied: nothing to run
        self._outputs.extend({key: output} for key, output in self.inner.to_keyed_list())

    def _inner(self) -> Any:
        if self.inner is None:
            raise FlinkAgentsError("apply(agent) before asking for outputs")
        return self.inner


class MigrationUsageError(FlinkAgentsError, RuntimeError):
    """A use of the environment Apache Flink Agents refuses with a ``RuntimeError``."""


class _KeyValues:
    """``(key, value)`` pairs of ``{"key": ..., "value": ...}`` records, read as iterated."""

    def __init__(self, records: list[Any]) -> None:
        self._records = records

    def __iter__(self) -> Any:
        return (_key_value(record) for record in self._records)


def _key_value(record: Any) -> tuple[Any, Any]:
    if not isinstance(record, Mapping):
        raise FlinkAgentsError(f"from_list takes dicts with a 'value', got {record!r:.100}")
    if "value" in record:
        value = record["value"]
    elif "v" in record:
        value = record["v"]
    else:
        raise FlinkAgentsError("Input data must be dict has 'v' or 'value' field")
    key = record.get("key", record.get("k", None))
    if "key" not in record and "k" not in record:
        key = uuid.uuid4()  # a run of its own, as there
    return key, value


class _RowKey:
    """A key selector given a table row (a dict) that reads fields as a ``Row``'s too."""

    def __init__(self, key_of: Any) -> None:
        self.key_of = key_of

    def __call__(self, row: Any) -> Any:
        return self.key_of(_Fields(row) if isinstance(row, dict) else row)


class _Fields(dict):
    """A row's dict whose columns read as attributes too."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _key_function(key_selector: Any) -> Any:
    if key_selector is None or callable(key_selector) or isinstance(key_selector, str):
        return key_selector
    get_key = getattr(key_selector, "get_key", None)
    if callable(get_key):  # a pyflink KeySelector
        return get_key
    raise FlinkAgentsError(
        f"key_selector must be a KeySelector or a function, got {key_selector!r}"
    )


def _rebound(data: dict[str, Any]) -> Any:
    from flink_agents.plan import bind_plan, validate_plan_data

    plan = validate_plan_data(data)
    bind_plan(plan)
    return plan
