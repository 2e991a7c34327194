#!/usr/bin/env bash
# Run the benchmarks, keep their output in bench/out/ and end with issue 13's goals as one
# table (bench/goals.py, from the figures the benchmarks record in bench/out/figures.jsonl).
# About 55 minutes on 2 cores (11-17 of them tracing_overhead's, mostly waiting for Phoenix to
# ingest); the first run also installs Apache Flink Agents 0.2.0 from PyPI into .bench-venvs/
# (about 1.7 GB, a minute).
#   bench/run_all.sh                 # everything
#   RECORDS=50000 bench/run_all.sh   # a quicker state benchmark
#   APACHE=0 bench/run_all.sh        # without the Apache Flink Agents comparison
#   SCALE=1 bench/run_all.sh         # then issue 45's scale benchmarks (about 5 more hours on
#                                    # 2 cores: a million keys on three state backends, a
#                                    # million long-term items, the two-hour soak;
#                                    # SOAK_MINUTES shortens the soak)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
RECORDS=${RECORDS:-200000}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT=bench/out
mkdir -p "$OUT"
export BENCH_FIGURES="$PWD/$OUT/figures.jsonl"
: > "$BENCH_FIGURES"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "nproc: $(nproc)"
  free -h
  grep -m1 "model name" /proc/cpuinfo
  "$PY" -V
  java -version 2>&1 | head -1
  "$PY" -c "import importlib.metadata as m; print('apache-flink', m.version('apache-flink'))"
  uptime
} 2>&1 | tee "$OUT/machine.txt"

# Each step's output is teed to bench/out/; a step that fails is reported at the end, and
# the others still run.
FAILED=()
step() {  # step OUTPUT_FILE COMMAND...
  local out=$1
  shift
  if ! "$@" 2>&1 | tee "$OUT/$out"; then
    FAILED+=("$out")
  fi
}

# The figures of issue 13's goals: thread mode (the default), medians of three rounds.
step state_throughput_thread.txt \
  "$PY" -m bench.state_throughput --records "$RECORDS" --mode thread --postgres --repeat 3
step state_throughput.txt \
  "$PY" -m bench.state_throughput --records "$RECORDS" --mode process --no-passthrough
step async_throughput_thread.txt "$PY" -m bench.async_throughput --configs thread --repeat 3
step async_throughput.txt "$PY" -m bench.async_throughput --configs defaults,small-bundle
if "$PY" -c "import shutil, sys, pathlib; sys.exit(not (shutil.which('py-spy') or pathlib.Path(sys.executable).with_name('py-spy').exists()))"; then
  step profile_dispatcher.txt "$PY" -m bench.profile_dispatcher
else
  echo "py-spy not installed: skipping the profile (.venv/bin/pip install py-spy)" | tee "$OUT/profile_dispatcher.txt"
fi
step long_term_batching.txt "$PY" -m bench.long_term_batching
step fan_out.txt "$PY" -m bench.fan_out
step resume_latency.txt "$PY" -m bench.resume_latency
step startup_memory_thread.txt "$PY" -m bench.startup_memory
step tracing_overhead.txt "$PY" -m bench.tracing_overhead --records 20000 --repeat 3

# Apache Flink Agents 0.2.0 on the same agent, in a venv of its own (see its README).
AFA="$PWD/.bench-venvs/apache-flink-agents/bin/python"
if [[ "${APACHE:-1}" == "0" ]]; then
  echo "APACHE=0: skipping the Apache Flink Agents comparison" | tee "$OUT/apache_flink_agents_thread.txt"
elif bash bench/apache_flink_agents/setup.sh > "$OUT/apache_flink_agents_setup.txt" 2>&1; then
  step apache_flink_agents_thread.txt \
    "$AFA" bench/apache_flink_agents/memory_agent.py --records 20000 --mode thread
else
  echo "Apache Flink Agents could not be installed (see $OUT/apache_flink_agents_setup.txt):" \
    "skipping the comparison" | tee "$OUT/apache_flink_agents_thread.txt"
fi

# Issue 45: keys, memory per key, checkpoints and restore, long-term memory and the soak at
# scale, each against raw PyFlink on the same backend where it has one.
if [[ "${SCALE:-0}" == "1" ]]; then
  step scale_keys.txt "$PY" -m bench.scale keys
  # RocksDB and ForSt at a million keys once more with the managed memory (block cache and
  # write buffers) of a TaskManager of Flink's default configuration (1,728 MiB a process:
  # 512 MiB): the MiniCluster's 128 MiB holds raw's state but not the agent's.
  step scale_keys_1m_512m.txt "$PY" -m bench.scale keys --keys 1000000 --backends rocksdb,forst \
    --managed-memory 512m
  step scale_fields.txt "$PY" -m bench.scale fields
  step scale_checkpoints.txt "$PY" -m bench.scale_checkpoints
  # Peak RSS again on RocksDB and ForSt with a fixed JVM heap, as a TaskManager has (-Xms =
  # -Xmx): left to itself the local JVM sizes its heap as its collector sees fit.
  step scale_checkpoints_fixed_heap.txt "$PY" -m bench.scale_checkpoints --backends rocksdb,forst \
    --jvm-heap 1g
  step long_term_scale.txt "$PY" -m bench.long_term_scale
  step soak_failures.txt "$PY" -m bench.soak --minutes "${SOAK_MINUTES:-120}" --fail-every 15
fi

step goals.txt "$PY" -m bench.goals "$BENCH_FIGURES"
if (( ${#FAILED[@]} )); then
  echo "failed: ${FAILED[*]} (see $OUT/)" >&2
  exit 1
fi
