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
# The order alternates (before-after, after-before, ...), so that neither tree always runs
# first in a pair, or always right after the other.
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
# Medians over the rounds, and the median of the rounds' after/before ratios (each pair ran
# back to back, so its ratio is the least touched by the machine's drift).
"$python" - "$out" <<'PY'
import re, statistics, sys
from pathlib import Path

out = Path(sys.argv[1])
figures = {
    "async at 256, runs/s": ("async", r"^thread mode +256 +[\d,]+ +[\d.]+ +[\d.]+ +([\d,]+)"),
    "no log / raw": ("state", r"without log/raw, net of empty[^\d]*([\d.]+)"),
    "default log / no log": ("state", r"default log/no log, net[^\d]*([\d.]+)"),
}
for name, (kind, pattern) in figures.items():
    rounds = {}
    for label in ("before", "after"):
        for path in out.glob(f"{kind}-{label}-*.txt"):
            found = re.search(pattern, path.read_text(), re.M)
            if found:
                number = int(path.stem.rsplit("-", 1)[1])
                rounds.setdefault(number, {})[label] = float(found[1].replace(",", ""))
    pairs = [r for r in rounds.values() if len(r) == 2]
    if not pairs:
        continue
    before = statistics.median(r["before"] for r in pairs)
    after = statistics.median(r["after"] for r in pairs)
    ratio = statistics.median(r["after"] / r["before"] for r in pairs)
    print(f"{name}: median before {before:g}, after {after:g} over {len(pairs)} rounds;"
          f" median of the rounds' after/before {ratio:.3f}")
PY
