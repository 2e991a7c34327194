#!/usr/bin/env bash
# Before/after on one machine, alternating: the state throughput (no log / raw, default log /
# no log; 100,000 records, thread mode) and async throughput at 256 calls in flight, each
# tree's sources run by this checkout's venv. Outputs go to OUT, one file per tree and round.
#
#   bash bench/ab.sh BEFORE_TREE AFTER_TREE [ROUNDS] [OUT]
#   (a tree: a checkout or `git worktree add --detach DIR REV`)
#   ONLY=async (or state) runs one of the two; ASYNC_SECONDS sets the async job's length
#   (its --target-seconds, 3 by default).
set -euo pipefail
before=$(realpath "$1"); after=$(realpath "$2"); rounds=${3:-3}; out=${4:-bench/out/ab}
python="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python"  # not realpath: the venv is a link
mkdir -p "$out"; out=$(realpath "$out")
run() {  # label tree round
  echo "== $1 round $3 $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)" >> "$out/log.txt"
  if [ "${ONLY:-state}" = state ]; then
    (cd "$2" && PYTHONPATH="$2" FLINK_AGENTS_DATA_DIR="$out/data-$1" "$python" -m bench.state_throughput \
      --records 100000 --no-passthrough --no-record-all > "$out/state-$1-$3.txt" 2>&1)
  fi
  if [ "${ONLY:-async}" = async ]; then
    (cd "$2" && PYTHONPATH="$2" FLINK_AGENTS_DATA_DIR="$out/data-$1" "$python" -m bench.async_throughput \
      --limits 256 --configs thread --per-key '' --coroutine-limits '' --defaults-records 0 \
      --target-seconds "${ASYNC_SECONDS:-3}" > "$out/async-$1-$3.txt" 2>&1)
  fi
}
# The order alternates (before-after, after-before, ...): whichever job runs first in a pair
# was measured faster on this machine (2026-11-29: by 5-15% at 256 in flight).
for round in $(seq "$rounds"); do
  if [ $((round % 2)) = 1 ]; then
    run before "$before" "$round"; run after "$after" "$round"
  else
    run after "$after" "$round"; run before "$before" "$round"
  fi
done
rm -rf "$out/data-before" "$out/data-after"
echo "done $(date -u +%H:%M:%S)" >> "$out/log.txt"
grep -H -E "without log/raw, net of empty|default log/no log, net" "$out"/state-*.txt || true
grep -H -E "^thread mode +256" "$out"/async-*.txt || true
