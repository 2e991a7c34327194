"""``LedgerAgent``'s injected failures (``flink_agents.testing.recovery``)."""

import pytest

from flink_agents.api import ActionExecutionError
from flink_agents.plan import to_plan
from flink_agents.runtime import LocalRunner
from flink_agents.testing.recovery import InjectedFailure, LedgerAgent, make_records, read_ledger


def test_the_ledger_agent_fails_once_after_its_call_when_its_marker_appears(tmp_path):
    ledger, marker = tmp_path / "ledger.jsonl", tmp_path / "fail-now"
    config = {"ledger": str(ledger), "fail_marker": str(marker)}
    runner = LocalRunner(to_plan(LedgerAgent).model_copy(update={"config": config}))
    first, second, third = make_records(3, 1)
    assert len(runner.run("u0", first)) == 1  # no marker: no failure
    marker.touch()
    with pytest.raises(ActionExecutionError) as failed:
        runner.run("u0", second)
    assert isinstance(failed.value.__cause__, InjectedFailure)
    assert not marker.exists()  # consumed by the call that failed
    assert [line["step"] for line in read_ledger(ledger)] == ["charge", "notify", "charge"]
    assert len(runner.run("u0", third)) == 1  # once only
