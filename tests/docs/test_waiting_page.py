"""docs/waiting.md's examples run as written and print what the page shows."""

from __future__ import annotations

from tests.docs.pages import run_first_example


def test_the_example_prints_the_lines_the_page_shows(tmp_path):
    printed, shown = run_first_example("waiting.md", tmp_path, "follow_ups.py")
    assert len(shown) == 7
    assert printed == shown


def test_the_signal_example_prints_the_lines_the_page_shows(tmp_path):
    printed, shown = run_first_example("waiting.md", tmp_path, "refunds.py", index=1)
    assert len(shown) == 4
    assert printed == shown


def test_the_forgetting_example_prints_the_lines_the_page_shows(tmp_path):
    printed, shown = run_first_example("waiting.md", tmp_path, "greeter.py", index=2)
    assert len(shown) == 3
    assert printed == shown
