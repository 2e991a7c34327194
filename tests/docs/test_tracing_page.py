"""docs/tracing.md: its ``config.yaml`` blocks are options the runtime reads as the page
says, and its table names every tracing option with its default."""

from __future__ import annotations

import re

from flink_agents.runtime import AgentOptions, load_options
from tests.docs.pages import DOCS

PAGE = (DOCS / "tracing.md").read_text()


def test_the_config_blocks_load_as_written(tmp_path):
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", PAGE, re.S) if "agent:" in b]
    assert len(blocks) == 2
    for block in blocks:
        (tmp_path / "config.yaml").write_text(block)
        options = load_options(conf_dir=str(tmp_path))
        assert options.tracing == "otlp"
        assert options.tracing_endpoint.startswith("http://")


def test_the_table_lists_every_tracing_option_with_its_default():
    rows = dict(re.findall(r"^\| `(tracing[\w-]*)` \| ([^|]+) \|", PAGE, re.M))
    fields = {
        field.alias: field.default
        for field in AgentOptions.model_fields.values()
        if field.alias and field.alias.startswith("tracing")
    }
    assert set(rows) == set(fields)
    for alias, default in fields.items():
        shown = rows[alias].strip()
        expected = "unset" if default is None else f"`{str(default).lower()}`"
        assert shown == expected, alias
