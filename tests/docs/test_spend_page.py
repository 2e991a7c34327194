"""docs/spend.md's example runs as written and prints what the page shows."""

from __future__ import annotations

from tests.docs.pages import run_first_example


def test_the_example_prints_the_lines_the_page_shows(tmp_path):
    printed, shown = run_first_example("spend.md", tmp_path, "summaries.py")
    assert len(shown) == 5
    assert printed == shown
