"""docs/skills.md's example runs as written and prints what the page shows."""

from __future__ import annotations

from tests.docs.pages import run_first_example


def test_the_example_prints_the_lines_the_page_shows(tmp_path):
    printed, shown = run_first_example("skills.md", tmp_path, "converter.py", in_work=True)
    assert len(shown) == 4
    assert printed == shown
