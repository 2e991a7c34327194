"""Finding a secret in the files Flink wrote."""

import os
import tempfile
import uuid
from collections.abc import Iterable
from pathlib import Path

import pyflink

PYFLINK_LOG_DIR = Path(pyflink.__file__).parent / "log"
"""Where PyFlink's JVM logs when neither FLINK_LOG_DIR nor env.log.dir is set."""


def fake_key() -> str:
    """A recognisable fake API key, a new one at every call."""
    return f"sk-fake-{uuid.uuid4().hex}"


def temp_entries_since(started: float) -> list[Path]:
    """Entries of the temporary directories changed since ``started`` (where Flink and Beam
    put blob stores, Python worker directories with their boot logs, JVM perf data): the
    session's (``tests/conftest.py``) and the machine's, pytest's base directory aside."""
    found = []
    roots = {Path(tempfile.gettempdir()), Path(os.environ.get("PYTEST_DEBUG_TEMPROOT", "/tmp"))}
    for entry in (entry for root in roots for entry in root.iterdir()):
        try:
            if not entry.name.startswith("pytest-of-") and entry.stat().st_mtime >= started:
                found.append(entry)
        except OSError:
            continue  # gone meanwhile
    return found


def files_holding(secret: str, places: Iterable[Path]) -> dict[str, int]:
    """Every file under ``places`` (files or directories) whose bytes hold ``secret``, with
    the number of times it occurs there."""
    needle = secret.encode()
    found: dict[str, int] = {}
    for place in places:
        files = [place] if place.is_file() else [p for p in place.rglob("*") if p.is_file()]
        for path in files:
            try:
                count = path.read_bytes().count(needle)
            except OSError:
                continue  # gone meanwhile, or not ours to read
            if count:
                found[str(path)] = count
    return found
