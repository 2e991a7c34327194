#!/usr/bin/env bash
# Create (or update) the venv the Apache Flink Agents benchmark runs in:
#   .bench-venvs/apache-flink-agents  (relative to the repository root)
# with Python 3.11, flink-agents 0.2.0 and apache-flink 2.2.1 from PyPI.
#
# Apache Flink Agents' package imports as `flink_agents`, like ours, so it cannot share
# the project's .venv. Running this again is cheap: an existing venv is reused and pip
# skips what is already installed at the pinned versions.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="$ROOT/.bench-venvs/apache-flink-agents"
PYTHON="${PYTHON:-python3.11}"
FLINK_AGENTS_VERSION="0.2.0"
APACHE_FLINK_VERSION="2.2.1"

if ! command -v "$PYTHON" >/dev/null 2>&1; then
    echo "setup.sh: $PYTHON not found (set PYTHON=/path/to/python3.11)" >&2
    exit 1
fi

if [[ -x "$VENV/bin/python" ]] && ! "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
    echo "setup.sh: $VENV is not a Python 3.11 venv; remove it and rerun" >&2
    exit 1
fi
if [[ ! -x "$VENV/bin/python" ]]; then
    mkdir -p "$(dirname "$VENV")"
    "$PYTHON" -m venv "$VENV"
fi

installed() {
    "$VENV/bin/python" -I - "$FLINK_AGENTS_VERSION" "$APACHE_FLINK_VERSION" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version

try:
    ok = (version("flink-agents"), version("apache-flink")) == (sys.argv[1], sys.argv[2])
except PackageNotFoundError:
    ok = False
sys.exit(0 if ok else 1)
PY
}

if installed; then
    echo "setup.sh: flink-agents==$FLINK_AGENTS_VERSION and apache-flink==$APACHE_FLINK_VERSION already in $VENV"
else
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install \
        "flink-agents==$FLINK_AGENTS_VERSION" "apache-flink==$APACHE_FLINK_VERSION"
fi

"$VENV/bin/python" -m pip check || echo "setup.sh: pip check reported conflicts (see above)" >&2
"$VENV/bin/python" -I - <<'PY'
from importlib.metadata import version

print(f"flink-agents {version('flink-agents')}, apache-flink {version('apache-flink')}")
PY
echo "venv: $VENV"
