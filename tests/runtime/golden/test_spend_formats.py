"""What budgets keep reads back across releases (golden fixtures, written once by
``make_current.key_spend_totals`` and ``budget_verdict``, never regenerated): a key budget's
totals in the key's short-term memory, and ``SpendGuard.admit``'s verdict in the action log."""

from __future__ import annotations

import pickle
import pickletools
from pathlib import Path

import pytest

from flink_agents.api import FlinkAgentsError
from flink_agents.runtime._spend import _reservations, _spent_in
from flink_agents.runtime.action_log import Spent
from tests.runtime.golden.make_current import budget_verdict, key_spend_totals

HERE = Path(__file__).parent
WINDOW = 1_764_460_800_000


def load(name: str) -> object:
    return pickle.loads((HERE / f"{name}.pickle").read_bytes())


def test_a_key_budgets_totals_read_back_and_are_written_the_same() -> None:
    stored = load("spend-0.3.0-key-totals")
    assert _spent_in(stored, WINDOW) == Spent(tokens=450, cost=0.0135, calls=3)
    assert _spent_in(stored, WINDOW + 3_600_000) == Spent()  # a later window: nothing yet
    assert key_spend_totals() == stored


def test_a_budgets_verdict_reads_back() -> None:
    stored = load("spend-0.3.0-verdict")
    assert stored == budget_verdict()
    assert _reservations(stored) == {"agent-calls": (WINDOW, Spent(42, 0.000105, 1))}


def test_what_budgets_keep_names_no_class_at_all() -> None:
    """Plain dicts, lists and numbers: no module of ours (or anyone's) to move."""
    for name in ("spend-0.3.0-key-totals", "spend-0.3.0-verdict"):
        data = (HERE / f"{name}.pickle").read_bytes()
        assert not [op for op, _, _ in pickletools.genops(data) if "GLOBAL" in op.name]


def test_a_later_version_is_refused_with_a_clear_error() -> None:
    later = {**key_spend_totals(), "version": 2}
    with pytest.raises(FlinkAgentsError, match="format version 2; this release reads version 1"):
        _spent_in(later, WINDOW)
    with pytest.raises(FlinkAgentsError, match="a budgets' verdict"):
        _reservations({**budget_verdict(), "version": 2})
