"""The Flink dispatcher: a ``KeyedProcessFunction`` that adapts PyFlink's callbacks, keyed
state and timers to the ``KeyDriver``, which owns the life of every run.

Keyed state, per key:
    ``sensory`` / ``short_term``  MapState[str, pickled]: flattened memory, the same
                                  ``FlatMemory`` code as the local runner, over MapState.
    ``control``                   ValueState: ``KeyControl`` (run sequence, the parked run,
                                  the count of queued inputs), read once per callback, in
                                  the versioned format of ``runtime/_persisted.py``. An
                                  idle key's (its run sequence alone) is kept in
                                  ``short_term``'s root entry instead: no entry of its own.
    ``pending_inputs``            ListState: inputs queued behind a parked run.

Timers: a processing-time timer wakes a parked run (its poll, or a retry's backoff), and an
event-time timer at ``DRAIN_TIMESTAMP``, which only the final watermark of a bounded input
reaches, finishes every parked run before the job ends (processing-time timers do not fire
after the input ends). In thread mode a parked run whose call has finished is resumed at the
end of the next callback of any key, made current for it in the keyed state backend
(``_and_ready``); its poll is then cancelled.
"""

from __future__ import annotations

import gc
import logging
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from time import monotonic, time_ns
from typing import Any

from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction, OutputTag, RuntimeContext, TimeDomain
from pyflink.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor

from flink_agents._shipping import ShippedByName, import_lock
from flink_agents.memory import CachedState, StoredState
from flink_agents.plan import bind_plan, plan_from_json
from flink_agents.runtime._driver import KeyControl, KeyDriver
from flink_agents.runtime._engine import RunEngine
from flink_agents.runtime._event_log import configured_event_log
from flink_agents.runtime._metrics import AgentMetrics
from flink_agents.runtime._options import AgentOptions
from flink_agents.runtime._persisted import decode_control, encode_control
from flink_agents.runtime.action_log import open_action_log
from flink_agents.runtime.flink._metrics import FlinkMetricsMirror
from flink_agents.runtime.flink._script import ScriptCode
from flink_agents.runtime.journal import ActionJournal

DRAIN_TIMESTAMP = 2**62
ERROR_TAG = OutputTag("agent-errors", Types.PICKLED_BYTE_ARRAY())
MEMORY_TAG = OutputTag("agent-memory", Types.PICKLED_BYTE_ARRAY())
EVENT_LOG_TAG = OutputTag("agent-event-log", Types.STRING())

logger = logging.getLogger(__name__)


class RejectedInput:
    """The key under which the key-taking step sends a record whose key could not be taken
    (pickled keys): the dispatcher passes its ``rejected`` record on to the error output.

    Sending it through the keyed stream, rather than to a side output of the key-taking
    step, keeps that step chained to the operator before it: in PyFlink's thread mode a
    side output there costs every record a share of the operator's time
    (``bench/RESULTS.md``)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is RejectedInput

    def __hash__(self) -> int:
        return hash(RejectedInput)

    def __reduce__(self) -> tuple[Any, ...]:
        return (RejectedInput, ())


REJECTED_STRING_KEY = "\x00flink-agents:rejected-input"
"""The same for string keys (``key_type=Types.STRING()``): no key taken from a record starts
with a NUL character in practice; for other key types rejected records use a side output."""


class AgentDispatcher(ShippedByName, KeyedProcessFunction):
    """Executes an agent plan (given as JSON) on the ``(key, record)`` pairs of the stream
    ``TakeKey`` keys.

    Pickles by name (``flink_agents._shipping``), and binds its plan under the worker's
    import lock: operators are built on several threads at once after a restore. What the
    plan names in the job's script (``script``) is defined in the worker's ``__main__``
    first (``ScriptCode``).
    """

    def __init__(
        self,
        plan_json: str,
        options: AgentOptions,
        job_id: str,
        action_log_url: str | None,
        script: ScriptCode | None = None,
    ) -> None:
        self._plan_json = plan_json
        self._script = script
        self._options = options.model_dump()
        self._job_id = job_id
        self._action_log_url = action_log_url
        self._driver: KeyDriver | None = None
        self._closing: weakref.finalize | None = None

    def open(self, runtime_context: RuntimeContext) -> None:
        options = AgentOptions(**self._options)
        journal = None
        if self._action_log_url is not None:
            # The journal loads the job's run index once: a fresh job has none and reads
            # nothing more; a restored attempt (or a pinned job name) replays what it lists.
            journal = ActionJournal(
                open_action_log(self._action_log_url),
                self._job_id,
                retention_ms=options.action_log_retention_ms,
                generated_name=self._job_id != options.action_log_job,
            )
        with import_lock:  # binding imports the plan's modules
            if self._script is not None:
                self._script.install()
            bound = bind_plan(plan_from_json(self._plan_json))
        subtask = _subtask_index(runtime_context)
        metrics = AgentMetrics()
        self._mirror = FlinkMetricsMirror(metrics, runtime_context.get_metrics_group())
        self._event_lines: deque[str] | None = None
        if options.event_log_level != "off" and options.event_log_output == "stream":
            self._event_lines = deque()
        event_log = configured_event_log(
            options,
            f"subtask-{subtask}",
            self._job_id,
            stream=None if self._event_lines is None else self._event_lines.append,
        )
        # Most jobs (thread mode, no event-log stream) hand the driver's emissions on as they are.
        self._plain = self._event_lines is None and self._mirror.thread_mode
        engine = RunEngine(
            bound,
            options,
            journal=journal,
            metrics=metrics,
            event_log=event_log,
            job_id=self._job_id,
        )
        self._driver = KeyDriver(engine, errors=ERROR_TAG, snapshots=MEMORY_TAG)
        if self._mirror.thread_mode:
            # Where a thread started on demand costs the operator (see the method); a process
            # mode worker starts them as before, with its first calls.
            engine.start_async_threads()
        self._state = _FlinkKeyState(
            runtime_context,
            batch_puts=self._mirror.thread_mode,
            expiring=options.short_term_memory_ttl is not None,
        )
        self._timers = _FlinkTimers()
        self._keys = _KeySwitch.of(runtime_context)
        if self._keys is not None:
            self._driver.parked.resume_elsewhere(self._keys.current)
        closing = _Closing(engine, self._mirror, options.stop_wait_ms / 1000)
        # ``close`` runs it; so does the interpreter when it drops this function unclosed
        # (see ``_Closing``), or when it exits.
        self._closing = weakref.finalize(self, closing)
        if self._mirror.thread_mode:
            # What exists now (PyFlink, the plan, its resources: a large, long-lived object
            # graph) is left out of the collector's full passes until ``close``: with parked
            # runs promoting objects to the oldest generation, full passes over it stopped
            # every Python thread for long pauses (bench/RESULTS.md). Only in thread mode,
            # where the interpreter is the TaskManager's: a local process-mode job runs its
            # Python in the client's own process.
            # Only the young generations are collected first, not all three: a full pass
            # here cost the job's start-up far more than the few objects it found. So
            # garbage already in the oldest generation (a former job's, in a long-lived
            # TaskManager) stays frozen with the rest until ``close``.
            gc.collect(1)
            gc.freeze()
            _YOUNG_GENERATION.raise_threshold(closing)

    def close(self) -> None:
        if self._closing is not None:
            self._closing()  # once: a later call, or the finalizer, does nothing

    def _failing(self) -> None:
        """An exception is leaving a callback: it fails this subtask, and Flink will not
        call ``close``. Close now rather than when the dispatcher is dropped: the failure
        may keep it alive. Its traceback holds the frames of this callback, and the same
        exception object may be held elsewhere (a shared embedding batch fails the futures
        of several parked runs with one exception), so a cycle through the parked runs, the
        metrics and the finalizer's ``_Closing`` kept a failed subtask's dispatcher, its
        call threads and its log open in the TaskManager for good. The failure itself goes
        on: a failure to close is only logged."""
        try:
            self.close()
        except Exception:
            logger.exception("closing the dispatcher of a failing subtask failed")

    def process_element(
        self, keyed: tuple[Any, Any], ctx: KeyedProcessFunction.Context
    ) -> Iterator[Any]:
        key = keyed[0]
        kind = type(key)
        self._mirror.maybe_flush()
        if (kind is str and key == REJECTED_STRING_KEY) or kind is RejectedInput:
            self._driver.metrics.input_rejected()
            return iter(((ERROR_TAG, keyed[1]),))  # a record whose key could not be taken
        self._timers.service = ctx.timer_service()
        try:
            # (key, record): the builder took the key before keying.
            emitted = self._driver.on_record(key, keyed[1], self._state, self._timers)
            if self._driver.parked.ready:
                emitted = self._and_ready(emitted, key, patient=True)
        except Exception:
            self._failing()
            raise
        return self._finished(emitted)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[Any]:
        self._timers.service = ctx.timer_service()
        self._mirror.maybe_flush()
        key = ctx.get_current_key()
        # The timestamp first: reading the time domain is a call into the JVM (thread mode),
        # and no processing-time timer is due that far ahead.
        draining = timestamp >= DRAIN_TIMESTAMP and ctx.time_domain() == TimeDomain.EVENT_TIME
        try:
            if draining:
                emitted = self._driver.on_end_of_input(key, self._state, self._timers)
            else:
                emitted = self._driver.on_timer(key, self._state, self._timers)
            if self._driver.parked.ready:
                emitted = self._and_ready(emitted, key, patient=not draining)
        except Exception:
            self._failing()
            raise
        return self._finished(emitted)

    def _and_ready(self, emitted: Iterator[Any], own_key: Any, patient: bool) -> Iterator[Any]:
        """The callback's own emissions, then those of the parked runs of other keys whose
        calls have finished, each resumed with its key made current in the keyed state
        backend (``_KeySwitch``): without waiting for their polls, a timer callback each.
        Their emissions are collected while their keys are current and passed on once the
        callback's own key is current again. Unless the input has ended, the callback
        (``patient``) leaves the ready runs that may wait (``ParkedRuns.resume_now``)
        to a later one, and has a timer fire soon for them."""
        yield from emitted
        driver, keys = self._driver, self._keys
        parked = driver.parked
        ready = parked.ready
        now = monotonic()
        if ready and (not patient or parked.resume_now(ready[0].when, now)):
            resumed: list[Any] = []
            own = keys.current()
            try:
                while ready:
                    first = ready[0]
                    if patient and not parked.resume_now(first.when, now):
                        break
                    ready.popleft()
                    if not parked.call_done(first.key):
                        continue  # resumed already: no key switch for it
                    keys.make_current(first.handle)
                    resumed.extend(driver.on_call_done(first.key, self._state, self._timers))
            finally:
                keys.make_current(own)
            yield from resumed
        if ready:
            parked.wake_soon(own_key, self._timers)

    def _finished(self, emitted: Iterable[Any]) -> Iterable[Any]:
        """What a callback returns to PyFlink. Emissions the driver made already (a tuple or
        a list) are returned as they are when nothing is due after them (``_plain``: no
        event-log lines, no metrics flush): taking them cannot fail. Anything else is
        wrapped in ``_guarded``."""
        if self._plain and (type(emitted) is tuple or type(emitted) is list):
            return emitted
        return self._guarded(emitted)

    def _guarded(self, emitted: Iterable[Any]) -> Iterator[Any]:
        """The driver's emissions, made as PyFlink takes them (a failure closes this
        dispatcher, ``_failing``), then the event-log lines they wrote (side output); in
        process mode, a metrics flush when one is due: PyFlink reports a bundle's metric
        updates when the bundle ends, so updates made at the end of a callback are not held
        back by the next callback's bundle."""
        try:
            yield from emitted
        except Exception:
            self._failing()
            raise
        if self._plain:
            return
        lines = self._event_lines
        while lines:
            yield EVENT_LOG_TAG, lines.popleft()
        if not self._mirror.thread_mode:
            self._mirror.maybe_flush()


class _Closing:
    """What closing a subtask's dispatcher does, apart from the dispatcher itself: the
    dispatcher's ``close`` runs it, and so does a finalizer when the dispatcher is dropped
    without being closed.

    PyFlink calls a Python function's ``close`` only once its input has ended
    (``endInput``). A subtask that stops before (a stop with a savepoint, which does not
    drain; a cancel; a failover) is not closed: in thread mode the operator's embedded
    interpreter drops the function when the task closes (PEMJA clears the operator's
    globals, the only reference to it), on the task's thread and before the task is
    reported finished, so the finalizer runs there; in process mode Beam tears the operation
    down (which calls ``close``), or the worker's exit runs the finalizer. So that this is
    the only reference the finalizer keeps, nothing here refers to the dispatcher.

    It waits for the durable calls in flight for at most ``wait_s`` (``stop-wait-ms``) so
    that their outcomes are recorded for a restore, then stops every thread of ours and
    closes the log."""

    def __init__(self, engine: RunEngine, mirror: FlinkMetricsMirror, wait_s: float) -> None:
        self._engine = engine
        self._mirror = mirror
        self._wait_s = wait_s

    def __call__(self) -> None:
        try:
            self._mirror.flush()  # the last counts reach Flink's metrics
        finally:
            if self._mirror.thread_mode:
                # Frozen objects are never collected: what this operator leaves behind
                # (and any other's) must be again, or a TaskManager that runs one job
                # after another would keep every operator's cycles.
                gc.unfreeze()
                _YOUNG_GENERATION.restore_threshold(self)
            self._engine.close(self._wait_s)  # the journal and its log too


class _YoungGenerationThreshold:
    """While a thread-mode dispatcher is open, the collector's youngest generation is
    collected once ``YOUNG_THRESHOLD`` more container objects live than at its last
    collection, not Python's default 700; the interpreter's own thresholds come back when
    the last open dispatcher closes.

    A parked run holds some 40 such objects (its state, context, coroutines, futures and
    callbacks) for as long as its call takes. At 700, with 256 calls of 0.2 s in flight, a
    young collection came every 16 runs, found nearly every run it saw still parked and
    promoted them into the older generations, which were then collected in turn: about 65
    us of collector time per run, some 7% of the job, with every Python thread stopped
    meanwhile (``bench/RESULTS.md``). Past a threshold that only what outlives a call's
    latency reaches, most runs are over, their objects freed, before a collection sees
    them. Objects that nothing but a cycle references wait longer to be freed: at most that
    many young ones.

    The open dispatchers are held weakly, each by its ``_Closing`` (which restores the
    threshold whether ``close`` or the dispatcher's finalizer runs it): one lost without
    either must not keep the threshold raised once it is gone."""

    YOUNG_THRESHOLD = 50_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: weakref.WeakSet[Any] = weakref.WeakSet()
        self._own: tuple[int, int, int] | None = None
        """The interpreter's thresholds while they are raised."""

    def raise_threshold(self, dispatcher: Any) -> None:
        with self._lock:
            self._open.add(dispatcher)
            if self._own is None:
                self._own = gc.get_threshold()
                young, *older = self._own
                gc.set_threshold(max(young, self.YOUNG_THRESHOLD), *older)

    def restore_threshold(self, dispatcher: Any) -> None:
        with self._lock:
            self._open.discard(dispatcher)
            if not self._open and self._own is not None:
                gc.set_threshold(*self._own)
                self._own = None

    def own_threshold(self) -> tuple[int, int, int]:
        """The interpreter's own thresholds, raised or not."""
        with self._lock:
            return self._own or gc.get_threshold()


_YOUNG_GENERATION = _YoungGenerationThreshold()


class _FlinkKeyState:
    """``KeyState`` over the operator's keyed state (scoped to the current key by Flink).

    ``batch_puts``: in thread mode a MapState's ``put_all`` is one call into the JVM for
    several entries (each ``put`` is one); process mode's cannot take a dict.

    A key's control value is kept in one of two places, never both: an idle key's (its run
    sequence alone, ``encode_control``'s int) in the short-term map's root entry,
    ``(2, names, sequence)`` (``memory/_stored.py``), rewritten with every run where the
    ValueState used to be, so that most keys hold one entry fewer; any other in the
    ``control`` ValueState, the root then holding its marker alone. Whoever writes one
    place empties the other (``KeyControl.apart`` tells which was written last), so a read
    may look in either first: ``expiring`` (a job with ``short-term-memory-ttl``, whose idle
    keys keep their expiry times with the value) looks in the ValueState first."""

    def __init__(
        self, runtime_context: RuntimeContext, batch_puts: bool = False, expiring: bool = False
    ) -> None:
        self.batch_puts = batch_puts
        self.expiring = expiring
        pickled = Types.PICKLED_BYTE_ARRAY()
        # Memory as ``StoredState`` keeps it: objects' markers as plain data, versioned.
        self.sensory = StoredState(
            runtime_context.get_map_state(MapStateDescriptor("sensory", Types.STRING(), pickled))
        )
        self.short_term = StoredState(
            runtime_context.get_map_state(MapStateDescriptor("short_term", Types.STRING(), pickled))
        )
        self._control = runtime_context.get_state(ValueStateDescriptor("control", pickled))
        self._pending = runtime_context.get_list_state(
            ListStateDescriptor("pending_inputs", pickled)
        )

    def control(self, short_term: CachedState) -> KeyControl | None:
        if self.expiring:
            return self._apart() or _with_root(short_term)
        return _with_root(short_term) or self._apart()

    def _apart(self) -> KeyControl | None:
        """The key's control value in the ``control`` ValueState, if it has one there."""
        control = decode_control(self._control.value())
        if control is not None:
            control.apart = True
        return control

    def set_control(self, control: KeyControl, short_term: CachedState) -> None:
        encoded = encode_control(control)
        if type(encoded) is int:  # an idle key: its run sequence with the root's marker
            # (0: a key that never ran, or was forgotten: nothing to keep)
            short_term.keep_with_root(encoded or None)
            if control.apart:
                self._control.clear()
                control.apart = False
            return
        if not control.apart:  # the root must not keep a sequence that is no longer it
            short_term.keep_with_root(None)
            control.apart = True
        self._control.update(encoded)

    def push_pending(self, record: Any) -> None:
        self._pending.add(record)

    def pop_pending(self) -> Any:
        first, *rest = self._pending.get()
        if rest:
            self._pending.update(rest)
        else:
            self._pending.clear()
        return first


def _with_root(short_term: CachedState) -> KeyControl | None:
    """An idle key's control value, kept with its short-term memory's root, if it is."""
    sequence = short_term.read_root()
    return None if sequence is None else KeyControl(sequence)


class _FlinkTimers:
    """``Timers`` over the timer service of the callback in progress.

    The clock is read in Python: Flink's processing time is the system clock
    (``System.currentTimeMillis``), and asking the timer service for it is a call into the
    JVM, made several times per parked run (``bench/RESULTS.md``)."""

    service: Any = None

    def now_ms(self) -> int:
        return time_ns() // 1_000_000

    def wake_at(self, due_ms: int) -> None:
        self.service.register_processing_time_timer(due_ms)

    def wake_at_end(self) -> None:
        self.service.register_event_time_timer(DRAIN_TIMESTAMP)

    def cancel(self, due_ms: int) -> None:
        self.service.delete_processing_time_timer(due_ms)

    def cancel_end(self) -> None:
        self.service.delete_event_time_timer(DRAIN_TIMESTAMP)


class _KeySwitch:
    """Reads and sets the current key of the operator's keyed state backend, through which
    a callback may make another key current (its state and timers then that key's).

    Thread mode: the backend is a Java object (``getCurrentKey`` / ``setCurrentKey``, the key
    as Java holds it). Process mode: PyFlink's Python-side backend, which keeps the current
    key itself (the state key, a ``Row`` of the key) and which its timer service reads when a
    timer is set or deleted: PyFlink makes each record's key current through it too."""

    __slots__ = ("current", "make_current")

    def __init__(self, current: Callable[[], Any], make_current: Callable[[Any], None]) -> None:
        self.current = current
        self.make_current = make_current

    @classmethod
    def of(cls, runtime_context: RuntimeContext) -> _KeySwitch | None:
        """The switch of this operator's backend; None where PyFlink does not expose it
        (internal attributes, pinned 2.3.0: then runs are resumed by their polls)."""
        python_side = getattr(runtime_context, "_keyed_state_backend", None)
        java = getattr(python_side, "_keyed_state_backend", None)
        if java is not None and hasattr(java, "setCurrentKey"):
            return cls(java.getCurrentKey, java.setCurrentKey)
        if hasattr(python_side, "set_current_key") and hasattr(python_side, "get_current_key"):
            return cls(python_side.get_current_key, python_side.set_current_key)
        return None


def _subtask_index(runtime_context: RuntimeContext) -> int:
    """This subtask's index. PyFlink 2.3's thread-mode context asks the Java context for a
    method Flink 2 moved to ``getTaskInfo()`` (AttributeError): ask there instead."""
    try:
        return runtime_context.get_index_of_this_subtask()
    except AttributeError:
        java = getattr(runtime_context, "_runtime_context", None)
        if java is None:
            raise
        return java.getTaskInfo().getIndexOfThisSubtask()
