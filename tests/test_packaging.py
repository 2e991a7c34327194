"""What `pip install` gives a user: the distribution's name, the Pythons it accepts, the command."""

import importlib.metadata
import sys

from packaging.specifiers import SpecifierSet

DISTRIBUTION = "pyflink-agents"


def test_the_distribution_is_ours_not_apache_flink_agents():
    # "flink-agents" on PyPI is Apache Flink Agents, which installs flink_agents too.
    assert importlib.metadata.distribution(DISTRIBUTION).metadata["Name"] == DISTRIBUTION
    assert DISTRIBUTION in importlib.metadata.packages_distributions()["flink_agents"]


def test_it_installs_the_flink_agents_command():
    scripts = importlib.metadata.distribution(DISTRIBUTION).entry_points.select(
        group="console_scripts"
    )
    assert {(e.name, e.value) for e in scripts} == {("flink-agents", "flink_agents.cli:main")}


def test_it_accepts_every_python_that_apache_flink_and_onnxruntime_both_support():
    ours = SpecifierSet(importlib.metadata.metadata(DISTRIBUTION)["Requires-Python"])
    flink = SpecifierSet(importlib.metadata.metadata("apache-flink")["Requires-Python"] or "")
    flink_versions = {
        c.rsplit(" ", 1)[-1]
        for c in importlib.metadata.metadata("apache-flink").get_all("Classifier")
        if c.startswith("Programming Language :: Python :: 3.")
    }
    onnx = SpecifierSet(importlib.metadata.metadata("onnxruntime")["Requires-Python"])
    supported = {v for v in flink_versions if v in flink and f"{v}.0" in onnx}
    assert supported == {"3.11", "3.12"}
    assert all(f"{v}.0" in ours for v in supported)
    assert "3.13.0" not in ours and "3.10.0" not in ours  # untested, or a dependency refuses
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in supported
