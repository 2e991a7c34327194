"""A knowledge set loaded as users load one, into a store of the test's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from flink_agents.runtime import load_knowledge

FAQ = [
    {"id": "returns", "text": "Items can be returned within 30 days for a full refund."},
    {"id": "shipping", "text": "Standard shipping takes three to five business days."},
    {"id": "hours", "text": "Our support team answers the phone from 9am to 6pm."},
    {"id": "warranty", "text": "Appliances have a two-year warranty against defects."},
]


@pytest.fixture
def faq_store(tmp_path: Path) -> str:
    """An embedded store holding knowledge set ``faq`` (the local runner's directory)."""
    store = str(tmp_path / "vectors")
    load_knowledge("faq", FAQ, options={"long-term-memory-store": store})
    return store
