#!/usr/bin/env bash
# Run the benchmarks and keep their output in bench/out/ (about 12 minutes on 2 cores).
#   bench/run_all.sh            # everything
#   RECORDS=50000 bench/run_all.sh   # a quicker state benchmark
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
RECORDS=${RECORDS:-200000}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT=bench/out
mkdir -p "$OUT"

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

"$PY" -m bench.state_throughput --records "$RECORDS" --mode thread 2>&1 \
  | tee "$OUT/state_throughput_thread.txt"
"$PY" -m bench.state_throughput --records "$RECORDS" --mode process --no-passthrough 2>&1 \
  | tee "$OUT/state_throughput.txt"
"$PY" -m bench.async_throughput 2>&1 | tee "$OUT/async_throughput.txt"
if "$PY" -c "import shutil, sys, pathlib; sys.exit(not (shutil.which('py-spy') or pathlib.Path(sys.executable).with_name('py-spy').exists()))"; then
  "$PY" -m bench.profile_dispatcher 2>&1 | tee "$OUT/profile_dispatcher.txt"
else
  echo "py-spy not installed: skipping the profile (.venv/bin/pip install py-spy)" | tee "$OUT/profile_dispatcher.txt"
fi
"$PY" -m bench.long_term_batching 2>&1 | tee "$OUT/long_term_batching.txt"
