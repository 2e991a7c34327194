"""Our operators reach PyFlink workers through ``flink_agents._shipping``, so a worker that
builds several operators at once (after every restore) cannot deadlock on import locks."""

from __future__ import annotations

import pickletools
import subprocess
import sys
import textwrap

import cloudpickle
import pytest

from flink_agents._shipping import ShippedFunction
from flink_agents.runtime._keys import ConstantKey, key_function
from flink_agents.runtime._options import AgentOptions
from flink_agents.runtime.flink._dispatcher import AgentDispatcher
from flink_agents.runtime.flink._environment import TakeKey
from flink_agents.runtime.flink._job import ParseJsonLines, _to_json


def shipped_objects() -> dict[str, object]:
    return {
        "dispatcher": AgentDispatcher("{}", AgentOptions(), "job", None),
        "parser": ParseJsonLines("user"),
        "field key": key_function("user"),
        "no key": key_function(None),
        "file key": ConstantKey("in.jsonl"),
        "take key": TakeKey(key_function("user")),
        "formatter": ShippedFunction(_to_json),
    }


def imported_globals(payload: bytes) -> set[str]:
    """The modules a pickle imports (GLOBAL / STACK_GLOBAL names)."""
    modules, strings = set(), []
    for opcode, arg, _ in pickletools.genops(payload):
        if opcode.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
            strings.append(arg)
        elif opcode.name == "STACK_GLOBAL":
            modules.add(strings[-2])
        elif opcode.name == "GLOBAL":
            modules.add(arg.split(" ")[0])
    return modules


def test_shipped_objects_import_nothing_of_ours_but_the_shipping_module():
    for name, obj in shipped_objects().items():
        ours = {m for m in imported_globals(cloudpickle.dumps(obj)) if m.startswith("flink_agents")}
        assert ours == {"flink_agents._shipping"}, name


def test_shipped_objects_round_trip():
    objects = shipped_objects()
    restored = {name: cloudpickle.loads(cloudpickle.dumps(obj)) for name, obj in objects.items()}
    assert type(restored["dispatcher"]) is AgentDispatcher
    assert restored["dispatcher"]._job_id == "job"
    assert restored["parser"].key_field == "user"
    assert restored["field key"]({"user": "ana"}) == "ana"
    assert restored["no key"]({"user": "ana"}) is None
    assert restored["formatter"] is _to_json  # the worker gets the function itself


def test_a_fresh_process_unpickles_every_operator_on_many_threads_at_once():
    """What a worker does after a restore. Without the shipping module this raised
    ``_DeadlockError`` (the package ``__init__`` imports the modules the threads import)."""
    payloads = [cloudpickle.dumps(obj) for obj in shipped_objects().values()]
    script = textwrap.dedent(
        """
        import pickle, sys, threading
        payloads = pickle.loads(sys.stdin.buffer.read())
        barrier = threading.Barrier(len(payloads) * 3)
        errors = []
        def load(payload):
            barrier.wait()
            try:
                pickle.loads(payload)
            except BaseException as error:
                errors.append(repr(error))
        threads = [threading.Thread(target=load, args=(p,)) for p in payloads * 3]
        for t in threads: t.start()
        for t in threads: t.join()
        print(errors)
        sys.exit(1 if errors else 0)
        """
    )
    for _ in range(3):  # a fresh interpreter each time: nothing of ours imported yet
        done = subprocess.run(
            [sys.executable, "-c", script],
            input=cloudpickle.dumps(payloads),
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()


def test_the_dispatcher_imports_nothing_an_operator_does_not_need():
    # An operator's imports delay a job's first output: neither the environment (with
    # PyFlink's Table API) nor asyncio nor rich, none of which the dispatcher uses; nor the
    # local runner, knowledge loading, long-term memory and its stores (imported when an
    # action first touches them), nor YAML (a plan reaches the operator as JSON).
    code = textwrap.dedent(
        """
        import sys
        import flink_agents.runtime.flink._dispatcher
        print(sorted(m for m in (
            "pyflink.table", "asyncio", "rich", "flink_agents.runtime.flink._environment",
            "flink_agents.runtime.flink._job", "flink_agents.runtime._call_loop",
            "flink_agents.runtime._local", "flink_agents.runtime._knowledge_load",
            "flink_agents.memory.long_term", "flink_agents.integrations.vector_stores",
            "tenacity", "yaml", "flink_agents.runtime.action_log._history",
        ) if m in sys.modules))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == "[]", result.stdout


def test_the_runners_still_export_what_they_import_on_first_use():
    import flink_agents.runtime as local_runner
    import flink_agents.runtime.action_log as action_log
    import flink_agents.runtime.flink as flink_runner

    assert flink_runner.FlinkExecutionEnvironment.__name__ == "FlinkExecutionEnvironment"
    assert callable(flink_runner.build_agent_job)
    assert local_runner.LocalRunner.__name__ == "LocalRunner"
    assert callable(local_runner.load_knowledge)
    for package in (local_runner, flink_runner, action_log):
        for name in package.__all__:
            assert getattr(package, name) is not None, name
        with pytest.raises(AttributeError, match=package.__name__):
            package.no_such_name  # noqa: B018
