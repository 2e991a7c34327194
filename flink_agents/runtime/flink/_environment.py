"""``AgentsExecutionEnvironment`` on a PyFlink ``StreamExecutionEnvironment``."""

from __future__ import annotations

import base64
import os
import pickle
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pyflink.common import Row, Types
from pyflink.datastream import (
    DataStream,
    KeyedStream,
    OutputTag,
    ProcessFunction,
    StreamExecutionEnvironment,
)
from pyflink.java_gateway import get_gateway
from pyflink.table import StreamTableEnvironment, Table

from flink_agents._ids import new_job_name
from flink_agents._shipping import ShippedByName, ShippedFunction
from flink_agents.api import AgentBuilder, AgentsExecutionEnvironment, Event, FlinkAgentsError
from flink_agents.api.internal import KeySelector
from flink_agents.plan import AgentPlan, to_plan
from flink_agents.runtime._erasure import keyed_input
from flink_agents.runtime._keys import key_function
from flink_agents.runtime._options import AgentOptions, load_options
from flink_agents.runtime._records import (
    BadRecord,
    RejectedRecord,
    rejected,
    signal_event,
    signal_type,
)
from flink_agents.runtime._scheduling import signal_input
from flink_agents.runtime.flink._dispatcher import (
    ERROR_TAG,
    EVENT_LOG_TAG,
    MEMORY_TAG,
    REJECTED_STRING_KEY,
    AgentDispatcher,
    RejectedInput,
)
from flink_agents.runtime.flink._logging import silence_secret_loggers
from flink_agents.runtime.flink._quiet import hide_beam_shutdown_noise
from flink_agents.runtime.flink._script import ScriptCode
from flink_agents.runtime.flink._table import output_shape, output_table, table_records

REJECTED_TAG = OutputTag("agent-rejected", Types.PICKLED_BYTE_ARRAY())
EXECUTION_MODE = "python.execution-mode"
EXECUTABLE = "python.executable"
PYTHONPATH = "python.pythonpath"


class FlinkExecutionEnvironment(AgentsExecutionEnvironment):
    """Runs agents as operators of a Flink job.

    Create it before the job's first Python operator: it sets the job's execution mode
    (``configure_python_workers``), which PyFlink reads when it creates each operator.

    Args:
        env: the job's ``StreamExecutionEnvironment``.
        t_env: a ``StreamTableEnvironment`` created over ``env``, for ``from_table`` and
            ``to_table``; by default the one of the first table given to ``from_table``,
            else one created over ``env`` when first needed (``self.t_env``).
        **options: agent options (``num_async_threads=32``, ``error_policy="error-output"``,
            ...), over those in ``$FLINK_CONF_DIR/config.yaml`` under ``agent:``.
    """

    def __init__(
        self,
        env: StreamExecutionEnvironment,
        t_env: StreamTableEnvironment | None = None,
        **options: Any,
    ) -> None:
        self.env = env
        self._t_env: StreamTableEnvironment | None = None
        if t_env is not None:
            self._use_t_env(t_env, "get_execution_environment's t_env")
        self.options: AgentOptions = load_options(options)
        self._owns_import_path = configure_python_workers(env)
        hide_beam_shutdown_noise()
        silence_secret_loggers()  # the JVM may have started before us, with any log4j file
        self._uids: set[str] = set()

    def unique_uid(self, name: str) -> str:
        """``name``, or ``name-2``, ``name-3``... when this job already has an operator of
        that uid (the same plan applied twice): uids must be unique, and stay the same
        from one submission of the program to the next for savepoints to match."""
        uid, n = name, 1
        while uid in self._uids:
            n += 1
            uid = f"{name}-{n}"
        self._uids.add(uid)
        return uid

    def from_datastream(
        self, stream: DataStream, key_selector: KeySelector = None, key_type: Any = None
    ) -> FlinkAgentBuilder:
        """Run agents over ``stream``, partitioned by ``key_selector`` (a function, a field
        name, or None for one key). ``key_type`` is the keys' Flink type (pickled by default;
        ``Types.STRING()`` is faster for string keys)."""
        return FlinkAgentBuilder(self, stream, key_selector, key_type)

    def from_table(
        self, table: Table, key_selector: KeySelector = None, key_type: Any = None
    ) -> FlinkAgentBuilder:
        """Run agents over an insert-only ``table``'s rows, each a dict of column -> value
        (nested rows as dicts), partitioned by ``key_selector`` (a function of the dict, a
        column name, or None for one key); ``key_type`` as for ``from_datastream``."""
        if not isinstance(table, Table):
            raise FlinkAgentsError(f"from_table takes a pyflink Table, got {type(table).__name__}")
        t_env = self._use_t_env(table._t_env, "the table's environment")
        return FlinkAgentBuilder(self, table_records(t_env, table), key_selector, key_type)

    @property
    def t_env(self) -> StreamTableEnvironment:
        """The table environment of ``from_table`` and ``to_table`` (see the class)."""
        if self._t_env is None:
            self._t_env = StreamTableEnvironment.create(self.env)
        return self._t_env

    def _use_t_env(self, t_env: Any, what: str) -> StreamTableEnvironment:
        """``t_env``, checked to be a ``StreamTableEnvironment`` over this job's ``env`` and
        the one already in use, if any; the one in use from now on."""
        if not isinstance(t_env, StreamTableEnvironment):
            raise FlinkAgentsError(
                f"{what} must be a StreamTableEnvironment created over the job's environment "
                f"(StreamTableEnvironment.create(env)), got {type(t_env).__name__}"
            )
        if not t_env._j_tenv.execEnv().equals(self.env._j_stream_execution_environment):
            raise FlinkAgentsError(
                f"{what} was created over another StreamExecutionEnvironment than the one "
                "given to get_execution_environment: create it with "
                "StreamTableEnvironment.create(env) from the same env"
            )
        if self._t_env is not None and not self._t_env._j_tenv.equals(t_env._j_tenv):
            raise FlinkAgentsError(
                f"{what} is not the table environment already in use by this job's agents; "
                "use one StreamTableEnvironment (pass it to get_execution_environment)"
            )
        self._t_env = t_env
        return t_env

    def from_list(self, records: Iterable[Any], key_selector: KeySelector = None) -> AgentBuilder:
        """A bounded input from Python objects (any picklable records)."""
        # from_collection cannot take bytes or arbitrary objects: ship them as base64 text.
        payloads = [base64.b64encode(pickle.dumps(record)).decode("ascii") for record in records]
        # Parallelism 1 like the source: a rebalance here would reorder the records of a key.
        stream = (
            self.env.from_collection(payloads, type_info=Types.STRING())
            .map(ShippedFunction(_unpickle), output_type=Types.PICKLED_BYTE_ARRAY())
            .set_parallelism(1)
        )
        return FlinkAgentBuilder(self, stream, key_selector, None)


class FlinkAgentBuilder(AgentBuilder):
    """``from_datastream(...).apply(agent).to_datastream()``."""

    def __init__(
        self,
        environment: FlinkExecutionEnvironment,
        stream: DataStream,
        key_selector: KeySelector,
        key_type: Any,
    ) -> None:
        self._environment = environment
        self._stream = stream
        self._key_selector = key_function(key_selector)
        self._key_type = key_type or Types.PICKLED_BYTE_ARRAY()
        self._plan: AgentPlan | None = None
        self._script: ScriptCode | None = None
        self._output: DataStream | None = None
        self._errors: DataStream | None = None
        self._errors_taken = False
        self._memory: DataStream | None = None
        self._signals: list[tuple[DataStream, Any, type | None]] = []
        self._rejected_signals: list[DataStream] = []

    def apply(self, agent: Any) -> FlinkAgentBuilder:
        if self._plan is not None:
            raise FlinkAgentsError("an agent is already applied to this input")
        plan = to_plan(agent)
        # Checked here, in the client: what the plan names in the job's script must pickle.
        self._script = ScriptCode.of(plan)
        self._plan = plan
        if self._environment._owns_import_path:  # the plan's modules are imported by now
            refresh_import_path(self._environment.env)
        return self

    def with_signals(
        self,
        signals: DataStream | Table,
        key_selector: KeySelector = None,
        event_type: type | None = None,
    ) -> FlinkAgentBuilder:
        """Signals for the agent's keys from a second stream or an insert-only table (see
        ``AgentBuilder.with_signals``): each record an ``Event``, or with ``event_type`` a
        mapping of its fields (a table's rows need it: each is a dict of column -> value);
        keyed by ``key_selector`` into the agent's keys (of the input's key type).
        Returns this builder."""
        if self._output is not None:
            raise FlinkAgentsError("add signals before asking for the agent's outputs")
        if isinstance(signals, Table):
            if event_type is None:
                raise FlinkAgentsError(
                    "a table's rows are not events: pass event_type= (the Event class each "
                    "row's columns make)"
                )
            t_env = self._environment._use_t_env(signals._t_env, "the signal table's environment")
            signals = table_records(t_env, signals)
        elif not isinstance(signals, DataStream):
            raise FlinkAgentsError(
                f"with_signals takes a DataStream or a Table, got {type(signals).__name__}"
            )
        self._signals.append((signals, key_function(key_selector), signal_type(event_type)))
        return self

    def to_datastream(self) -> DataStream:
        """The agent's outputs, one record per ``OutputEvent`` payload (pickled type)."""
        if self._output is None:
            if self._plan is None:
                raise FlinkAgentsError("apply(agent) before asking for outputs")
            options = self._environment.options
            # Decided here, on the client, so every subtask and every restart of this job
            # agrees: the job's name in the action log, and an absolute path to the log.
            dispatcher = AgentDispatcher(
                self._plan.to_json(),
                options,
                job_id=options.action_log_job or new_job_name(),
                action_log_url=options.action_log_url(embedded_default=True),
                script=self._script,
            )
            # The key is taken once, before keying: a record whose key cannot be taken goes
            # to the error output instead of failing the job (and failing again after every
            # restart). Same parallelism as the input, so the records of a key stay in order.
            # Rejected records travel to the dispatcher under a reserved key when the key
            # type can hold one (pickled or string keys), else to a side output of this step.
            # One Python step takes the key and keys the stream (``_keyed``), where PyFlink's
            # ``key_by`` would add a second one after it (a cost per record in both modes,
            # bench/RESULTS.md).
            rejected_key = _rejected_key_for(self._key_type)
            keyed = (
                self._stream.process(
                    TakeKey(self._key_selector, rejected_key),
                    output_type=Types.ROW([self._key_type, Types.PICKLED_BYTE_ARRAY()]),
                )
                .set_parallelism(self._stream._j_data_stream.getParallelism())
                .name(f"agent-key:{self._plan.name}")
                .uid(self._environment.unique_uid(f"agent-key:{self._plan.name}"))
            )
            rows = keyed
            for number, (signals, key_of, event_type) in enumerate(self._signals, 1):
                signal_rows = (
                    signals.process(
                        TakeKey(key_of, rejected_key, signals_of=event_type or Event),
                        output_type=Types.ROW([self._key_type, Types.PICKLED_BYTE_ARRAY()]),
                    )
                    .set_parallelism(signals._j_data_stream.getParallelism())
                    .name(f"agent-signals:{self._plan.name}")
                    .uid(self._environment.unique_uid(f"agent-signals-{number}:{self._plan.name}"))
                )
                rows = rows.union(signal_rows)
                if rejected_key is None:
                    self._rejected_signals.append(signal_rows.get_side_output(REJECTED_TAG))
            self._output = (
                _keyed(rows, self._key_type)
                .process(dispatcher, output_type=Types.PICKLED_BYTE_ARRAY())
                .name(f"agent:{self._plan.name}")
                .uid(self._environment.unique_uid(f"agent:{self._plan.name}"))
            )
            # PyFlink routes (tag, value) pairs to a side output only once the side output is
            # asked for; without this, error records would land in the main output.
            self._errors = self._output.get_side_output(ERROR_TAG)
            if rejected_key is None:
                self._errors = self._errors.union(
                    keyed.get_side_output(REJECTED_TAG), *self._rejected_signals
                )
            if self._environment.options.memory_snapshots:
                self._memory = self._output.get_side_output(MEMORY_TAG)
            options = self._environment.options
            if options.event_log_level != "off" and options.event_log_output == "stream":
                self._event_log = self._output.get_side_output(EVENT_LOG_TAG)
        return self._output

    def event_log_stream(self) -> DataStream:
        """With ``event-log-level`` set and ``event-log-output: stream``: the event log as
        JSON lines (``docs/observability.md``), to sink anywhere."""
        self.to_datastream()
        if getattr(self, "_event_log", None) is None:
            raise FlinkAgentsError(
                "the event log is not a stream: pass event_log_level='standard' (or "
                "'verbose') and event_log_output='stream'"
            )
        return self._event_log

    def error_stream(self) -> DataStream:
        """Input whose key could not be taken (``kind: rejected``, with ``reason`` and
        ``input``) and runs that failed under the ``error-output`` (or exhausted ``retry``)
        policy (``kind: failed_run``, with ``key``, ``input``, ``run_sequence``, ``action``,
        ``error``, ``attempts``): dicts, the same as the local runner's. After ``to_table``,
        also outputs that did not fit the table's schema (``kind: rejected_output``, with
        ``reason`` and ``output``)."""
        self.to_datastream()
        self._errors_taken = True
        return self._errors

    def to_table(self, schema: Any = None, output_type: Any = None) -> Table:
        """The agent's outputs as a ``Table``: each ``OutputEvent`` payload becomes one row
        of the declared schema, and a payload that does not fit it goes to
        ``error_stream()`` as a ``rejected_output`` record, with the reason.

        Args:
            schema: the rows' schema: a pydantic model class (its fields are the columns;
                ``X | None`` fields are nullable), ``DataTypes.ROW([...])``,
                ``Types.ROW_NAMED([...], [...])``, or a ``Schema`` (its physical columns are
                the row's; computed columns, metadata and watermarks apply).
            output_type: with a ``Schema`` (or alone), the rows' type as a ``RowTypeInfo``,
                as Apache Flink Agents' ``to_table(schema, output_type)`` takes it.

        Call it before ``error_stream()``, which then includes the rejected outputs.
        """
        if self._errors_taken:
            raise FlinkAgentsError(
                "call to_table() before error_stream(): outputs that do not fit the table's "
                "schema join the error stream, which is already handed out"
            )
        outputs = self.to_datastream()
        t_env = self._environment.t_env
        shape = output_shape(schema, output_type, t_env)
        name = f"agent-rows:{self._plan.name}"
        table, rejected = output_table(
            outputs, shape, t_env, name, self._environment.unique_uid(name)
        )
        self._errors = self._errors.union(rejected)
        return table

    def memory_stream(self) -> DataStream:
        """With the ``memory_snapshots`` option: after every run, a dict with ``key``,
        ``run_sequence`` and ``short_term_memory`` (a nested-dict snapshot)."""
        self.to_datastream()
        if self._memory is None:
            raise FlinkAgentsError("memory snapshots are off: pass memory_snapshots=True")
        return self._memory

    def to_list(self) -> list[Any]:
        """Execute the job and collect the outputs (for tests: about 2 ms per record)."""
        with self.to_datastream().execute_and_collect() as results:
            return list(results)


def configure_python_workers(env: StreamExecutionEnvironment) -> bool:
    """Make the job's Python workers run this interpreter's code, unless the job chose
    otherwise: returns whether the workers' import path is ours to keep up to date
    (``refresh_import_path``).

    - ``python.executable`` (process mode's workers) becomes this interpreter unless the
      job set it (``-pyexec`` with ``flink run``, or its configuration): a script run as
      ``.venv/bin/python my_job.py`` without activating the venv must not get the
      ``python`` first on ``PATH``.
    - ``python.execution-mode`` becomes ``thread`` unless the job chose a mode. Thread
      mode (Python inside the JVM) restores a Python operator's timers after a failure,
      which process mode does not (a key parked at a checkpoint would wait for its next
      record forever), and runs the dispatcher about three times faster.
    - In thread mode, ``python.pythonpath`` becomes this interpreter's import path unless
      the job set it. The embedded interpreter is the base installation of the Python
      that PyFlink was built against: it processes no venv and no ``.pth`` file, so it
      imports nothing of an editable install (ours included) nor of the venv unless
      told where (``_import_path``).
    """
    config = _python_config(env)
    if config.getString(EXECUTABLE, None) is None:
        env.set_python_executable(sys.executable)
    mode = config.getString(EXECUTION_MODE, None)
    if mode is None:
        mode = "thread"
        config.setString(EXECUTION_MODE, mode)
    if mode == "thread" and config.getString(PYTHONPATH, None) is None:
        refresh_import_path(env)
        return True
    return False


def refresh_import_path(env: StreamExecutionEnvironment) -> None:
    """Set the thread-mode workers' import path to this interpreter's as it is now: with
    the roots of the modules imported since (an agent's module, found by an editable
    install's finder)."""
    _python_config(env).setString(PYTHONPATH, os.pathsep.join(_import_path()))


def execution_mode(env: StreamExecutionEnvironment) -> str:
    """The job's PyFlink execution mode: ``thread`` or ``process``."""
    return _python_config(env).getString(EXECUTION_MODE, "process")


def _python_config(env: StreamExecutionEnvironment) -> Any:
    """The configuration PyFlink reads the Python options of the job from."""
    from pyflink.java_gateway import get_gateway

    util = get_gateway().jvm.org.apache.flink.python.util.PythonConfigUtil
    return util.getEnvironmentConfig(env._j_stream_execution_environment)


def _import_path() -> list[str]:
    """The directories this interpreter imports from: ``sys.path`` (the working directory
    for ``""``), then the root of every loaded top-level module that none of them holds
    (an editable install maps its packages through a finder that a ``.pth`` file installs,
    which the embedded interpreter never runs)."""
    entries = [os.getcwd() if entry == "" else entry for entry in sys.path]
    # ``copy``, not ``list(...items())``: building the list allocates a tuple an entry, and
    # a garbage collection there runs Python code (finalisers, and through them other
    # threads) that may import, changing ``sys.modules`` while it is iterated (seen once).
    for name, module in sys.modules.copy().items():
        if "." in name or name == "__main__":
            continue
        root = _module_root(name, getattr(module, "__file__", None))
        if root is not None:
            entries.append(root)
    return list(dict.fromkeys(e for e in entries if os.path.isdir(e)))


def _module_root(name: str, file: str | None) -> str | None:
    """The directory a top-level module ``name`` loaded from ``file`` is imported from."""
    if not file:
        return None
    path = Path(file)
    if path.stem == "__init__":
        path = path.parent
    if path.name.split(".")[0] != name:  # an extension module's suffix, a zip, a frozen file
        return None
    return str(path.parent)


class TakeKey(ShippedByName, ProcessFunction):
    """``Row(key, (key, record))`` for a record whose key can be taken (the row PyFlink's
    ``key_by`` makes, keyed on its first field by ``_keyed``; the dispatcher gets the
    pair), else a ``rejected`` error record: bad input, whatever the error policy (it is
    for actions). The rejected record goes on under ``rejected_key``, which the dispatcher
    sends to its error output, or, when the key type has no room for such a key
    (``rejected_key`` None), to ``REJECTED_TAG``."""

    def __init__(self, key_of: Any, rejected_key: Any = None, signals_of: Any = None) -> None:
        self.key_of = key_of
        self.rejected_key = rejected_key
        self.signals_of = signals_of
        """For a signal stream (``with_signals``): the Event class its records are, or are
        made into (``Event``: records must be events)."""

    def process_element(self, record: Any, ctx: ProcessFunction.Context) -> Any:
        # A one-element tuple, not a generator: PyFlink iterates whatever comes back.
        if type(record) is RejectedRecord:  # rejected before this step (the main job's parser)
            return (self._rejection(record.error),)
        try:
            key, value = keyed_input(self.key_of, record)
            if type(key) is str and key == REJECTED_STRING_KEY:
                raise BadRecord(f"the key {key!r} is reserved by flink-agents")
            if self.signals_of is not None and value is record:  # (not a ForgetKey)
                event_type = None if self.signals_of is Event else self.signals_of
                return (Row(key, (key, signal_input(signal_event(record, event_type)))),)
        except BadRecord as error:
            return (self._rejection(rejected(str(error), input=record)),)
        return (Row(key, (key, value)),)

    def _rejection(self, error: dict[str, Any]) -> Any:
        """``error`` on its way to the error output: under the reserved key, else tagged."""
        if self.rejected_key is None:
            return REJECTED_TAG, error
        return Row(self.rejected_key, (self.rejected_key, error))


def _rejected_key_for(key_type: Any) -> Any:
    """The reserved key rejected records travel under for keys of ``key_type``, or None."""
    if key_type == Types.PICKLED_BYTE_ARRAY():
        return RejectedInput()
    if key_type == Types.STRING():
        return REJECTED_STRING_KEY
    return None


def _keyed(rows: DataStream, key_type: Any) -> KeyedStream:
    """``rows`` of ``Row(key, value)`` keyed on their first field, as a stream of the values:
    what PyFlink's ``key_by`` builds after the Python step that makes such rows (its Java
    key selector, which takes the row's first field)."""
    keyed = rows._j_data_stream.keyBy(
        get_gateway().jvm.KeyByKeySelector(), Types.ROW([key_type]).get_java_type_info()
    )
    return KeyedStream(keyed, Types.PICKLED_BYTE_ARRAY(), rows)


def _unpickle(payload: str) -> Any:
    return pickle.loads(base64.b64decode(payload))
