"""``bench.goals``: the issue 13 table ``make bench`` ends with, from recorded figures."""

from __future__ import annotations

import json

from bench import goals
from bench._common import FIGURES_ENV, record_figure


def _row(output: str, start: str) -> str:
    return next(line for line in output.splitlines() if line.startswith(start))


def test_recorded_figures_are_judged_against_their_goals(tmp_path, monkeypatch, capsys):
    path = tmp_path / "figures.jsonl"
    monkeypatch.setenv(FIGURES_ENV, str(path))
    record_figure("state.thread.no_log_over_raw", 0.4, "50,000 records, thread mode")
    record_figure("state.thread.no_log_over_raw", 0.75, "a later run")  # the last one counts
    record_figure("state.thread.defaults_rec_s", 12_000.0, "ours")
    record_figure("apache.thread.rec_s", 2_000.0, "theirs")
    record_figure("fan_out.local", 1.7, "10 runs")  # at most 1.5 calls

    entries = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["figure"] for e in entries][:2] == ["state.thread.no_log_over_raw"] * 2
    assert {"value", "detail", "at", "load"} <= set(entries[0])

    assert goals.main([str(path)]) == 0
    output = capsys.readouterr().out
    assert "0.75" in _row(output, "1: agent, action_log=none") and "NOT MET" not in _row(
        output, "1: agent, action_log=none"
    )
    apache = _row(output, "1: agent, all defaults / Apache")
    assert "6.00" in apache and "MET" in apache and "ours; theirs" in apache
    assert "NOT MET" in _row(output, "4: fan-out to three 200 ms calls, local")
    assert "not measured" in _row(output, "2: agent, PostgreSQL log")
    assert "2 of 3 measured figures meet their goal" in output


def test_without_the_environment_nothing_is_recorded(tmp_path, monkeypatch):
    monkeypatch.delenv(FIGURES_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    record_figure("state.thread.no_log_over_raw", 0.5)
    assert list(tmp_path.iterdir()) == []
