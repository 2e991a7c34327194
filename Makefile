# The two commands that must work on a fresh machine: `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-py312 lint clean cluster-up cluster-down submit bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Stamps make re-installs happen only when pyproject.toml changes.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/flink-agents demo

# Arize Phoenix, the OpenTelemetry trace viewer that the tests in tests/tracing start on
# loopback, in a venv of its own: it pulls protobuf 7 and grpcio 1.8x, which conflict with the
# project's venv (PyFlink and Beam pin older ones). The tests find it at
# .venv-phoenix/bin/phoenix unless FLINK_AGENTS_PHOENIX names another executable. (About a
# minute and 850 MB.) The venv ignores itself, as Python 3.13's venvs do: git and ruff (`ruff
# check .` would lint its scripts) leave it alone.
PHOENIX_VENV := .venv-phoenix

$(PHOENIX_VENV)/.installed:
	$(PYTHON) -m venv $(PHOENIX_VENV)
	echo '*' > $(PHOENIX_VENV)/.gitignore
	$(PHOENIX_VENV)/bin/pip install --quiet --disable-pip-version-check arize-phoenix==20.26.1
	touch $@

# The suite in two passes: the tests that start no Flink on every core (pytest-xdist), then
# those that do (MiniCluster, a standalone cluster) one at a time: two Flink jobs at once on
# a 2-core machine slow each other past their timeouts.
NO_FLINK := -m "not flink and not slow" -n auto
WITH_FLINK := -m "flink or slow"

test: $(VENV)/.installed-test $(PHOENIX_VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/pytest $(NO_FLINK)
	$(BIN)/pytest $(WITH_FLINK)

# The quick suite on Python 3.12 (the other Python we support), in a venv of its own. The
# tests that start no Flink: the public API, plans, the local runner, the golden state and id
# values, the shared vector store (it hung a 3.12 CI once). In MiniCluster: a one-file job
# run the way a user first runs one (default mode, an unactivated venv), and the recovery
# test where the interpreter's exit mattered (a failed worker's exit once held the vector
# store past the next attempt's start on 3.12 only: process mode, with the action log). The
# other one-file modes, the thread-mode variants, the MiniCluster restarts and the restore of
# a parked run add no 3.12 concern and run on the default Python with the parity and other
# Flink suites (`make test`), which keeps the CI within its 30 minutes.
PYTHON312 ?= $(shell bash .ci/find-python 3.12)
VENV312 := .venv-3.12
QUICK_SUITE := tests/api tests/plan tests/runtime/test_local_runner.py tests/runtime/golden \
	tests/test_ids.py tests/integrations/vector_stores/test_shared.py
QUICK_FLINK_SUITE := tests/runtime/flink/test_script_jobs.py \
	tests/recovery/test_long_term_batching.py
QUICK_FLINK_LEFT_OUT := process-mode or compiled-plan or thread-no-log or thread-sqlite-log

$(VENV312)/bin/python:
	@test -n "$(PYTHON312)" || { echo "no Python 3.12 interpreter found (set PYTHON312=...)"; exit 1; }
	$(PYTHON312) -m venv $(VENV312)

# (Compiled at install: with `--no-compile`, the 3.12 pass took twice as long, its Flink jobs'
# Python workers compiling every module they import again, CI 2026-11-29.)
$(VENV312)/.installed-test: pyproject.toml | $(VENV312)/bin/python
	$(VENV312)/bin/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

test-py312: $(VENV312)/.installed-test
	$(VENV312)/bin/pytest $(QUICK_SUITE) $(NO_FLINK)
	$(VENV312)/bin/pytest $(QUICK_FLINK_SUITE) -k "not ($(QUICK_FLINK_LEFT_OUT))"

# A standalone Flink cluster on loopback from the pyflink package's own scripts.
FLINK = $(BIN)/python -c 'import os, pyflink; print(os.path.dirname(pyflink.__file__))'
cluster-up: $(VENV)/.installed
	$(BIN)/flink-agents cluster up

cluster-down: $(VENV)/.installed
	$(BIN)/flink-agents cluster down

# Submit the main job to the cluster started by `make cluster-up`.
submit: $(VENV)/.installed
	FLINK_CONF_DIR=.flink/conf bash "$$($(FLINK))/bin/flink" run -py jobs/agent_job.py \
		-pyexec $(abspath $(BIN)/python) -pyclientexec $(abspath $(BIN)/python) \
		--plan plans/support_triage.yaml --input data/support_tickets.jsonl \
		--output out/cluster --key user --memory-snapshots

bench: $(VENV)/.installed-test  # SCALE=1: issue 45's scale benchmarks too (hours)
	SCALE=$(SCALE) bash bench/run_all.sh

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) $(VENV312) $(PHOENIX_VENV) build *.egg-info .pytest_cache .ruff_cache .flink out
