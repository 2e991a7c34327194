"""The multimodal test's job, in a child process (a JVM of its own, whose Python workers see
the stand-in's address): ``python -m tests.runtime.flink.multimodal_job <spec.json>``.

``Describes`` (``tests/integrations/multimodal_agents.py``) on MiniCluster in thread mode, over
the spec's records, each given the test image and document as bytes. The last line of stdout
is ``RESULT [outputs]``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.integrations.multimodal_agents import PDF, PNG, Describes
from tests.runtime.flink.runners import run_agent


def main(argv: list[str]) -> None:
    spec = json.loads(Path(argv[0]).read_text())
    records = [{**record, "image": PNG, "doc": PDF} for record in spec["records"]]
    outputs = run_agent("flink", Describes, records, "id")
    print("RESULT " + json.dumps(outputs), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
