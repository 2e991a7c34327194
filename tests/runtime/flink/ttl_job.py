"""The memory TTL test's job, in a child process: ``python -m tests.runtime.flink.ttl_job
<spec.json>``.

``Remembers`` (``tests/runtime/forgetting_agents.py``) with a short
``short-term-memory-ttl`` reads JSON lines from a monitored directory and commits its
outputs on checkpoints. One key gets its ``first`` records and then nothing for longer than
the TTL, while the other gets a record every ``beat_s`` seconds (``beats``); then each gets
one more record (``last``), and the job is stopped with a savepoint, which the test
searches. The last line of stdout is ``RESULT {"savepoint", "last_at"}``: the savepoint's
path, and when the last records were dropped.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tests.memory.long_term.rescale_job import stop_with_savepoint
from tests.runtime.flink.forget_job import build_job, committed
from tests.runtime.flink.stop_savepoint_job import drop, until


def main(argv: list[str]) -> None:
    spec = json.loads(Path(argv[0]).read_text())
    client = build_job(spec, restarts=0, short_term_memory_ttl=spec["ttl_s"]).execute_async("ttl")
    ended = client.get_job_execution_result()
    drop(spec, "first.jsonl", spec["first"])
    until(lambda: {r["id"] for r in spec["first"]} <= committed(spec), "first outputs", ended)
    for n, beat in enumerate(spec["beats"]):
        time.sleep(spec["beat_s"])
        drop(spec, f"beat-{n}.jsonl", [beat])
    until(lambda: {r["id"] for r in spec["beats"]} <= committed(spec), "beats' outputs", ended)
    last_at = time.time()
    drop(spec, "last.jsonl", spec["last"])
    until(lambda: {r["id"] for r in spec["last"]} <= committed(spec), "last outputs", ended)
    savepoint = stop_with_savepoint(client, spec["savepoint_dir"])
    ended.result()
    print("RESULT " + json.dumps({"savepoint": savepoint, "last_at": last_at}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
