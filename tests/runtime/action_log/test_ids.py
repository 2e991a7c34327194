"""digest_args and external_id: deterministic across calls and processes."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import enum
import os
import subprocess
import sys
import uuid
from pathlib import Path

from flink_agents.runtime.action_log import digest_args, external_id
from tests.runtime.action_log.records import Answer, ident

REPO = Path(__file__).resolve().parents[3]


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int
    y: int


def sample_args() -> tuple[tuple, dict]:
    """Arguments covering every canonical encoding, built the same in any process."""
    args = (
        "prompt",
        {"b": 1, "a": [1, 2.5, None, True]},
        {"x", "y", "z", "ünï"},
        frozenset({3, 1}),
        b"\x00raw",
        Answer(text="t", confidence=0.5),
        Point(1, 2),
        Color.RED,
        uuid.UUID(int=7),
        datetime.datetime(2024, 1, 2, 3, 4, 5),
        collections.OrderedDict(a=1),
        (1, (2, 3)),
    )
    return args, {"temperature": 0.2, "model": "m"}


def test_digest_args_is_stable_across_calls() -> None:
    """The same arguments digest the same, whatever dict, set or kwargs order."""
    args, kwargs = sample_args()
    first = digest_args(args, kwargs)
    assert len(first) == 64 and int(first, 16) >= 0
    assert digest_args(args, dict(reversed(kwargs.items()))) == first
    assert digest_args(({"a": 1, "b": 2},), {}) == digest_args(({"b": 2, "a": 1},), {})


def test_digest_args_is_stable_across_processes() -> None:
    """Another interpreter, with another hash seed, computes the same digest."""
    args, kwargs = sample_args()
    code = (
        "from tests.runtime.action_log.test_ids import sample_args;"
        "from flink_agents.runtime.action_log import digest_args;"
        "print(digest_args(*sample_args()))"
    )
    digests = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        digests.add(done.stdout.strip())
    assert digests == {digest_args(args, kwargs)}


def test_digest_args_differs_for_different_args() -> None:
    """Changed values, types, positions or keyword names change the digest."""
    variants = [
        ((1,), {}),
        ((1.0,), {}),
        ((True,), {}),
        (("1",), {}),
        ((1, 2), {}),
        ((2, 1), {}),
        (([1, 2],), {}),
        (((1, 2),), {}),
        ((), {"a": 1}),
        ((), {"b": 1}),
        ((Answer(text="t", confidence=0.5),), {}),
        ((Answer(text="t", confidence=0.6),), {}),
        ((Point(1, 2),), {}),
        (({"x": 1, "y": 2},), {}),
        (("ab", "c"), {}),
        (("a", "bc"), {}),
    ]
    digests = [digest_args(args, kwargs) for args, kwargs in variants]
    assert len(set(digests)) == len(digests)


def test_digest_args_falls_back_for_other_objects() -> None:
    """Objects without a canonical form are digested by pickle, or by repr sans address."""
    assert digest_args((Path("/a"), len), {}) == digest_args((Path("/a"), len), {})
    unpicklable = lambda: None  # noqa: E731
    assert digest_args((unpicklable,), {}) == digest_args((lambda: None,), {})
    cyclic: list = [1]
    cyclic.append(cyclic)
    assert digest_args((cyclic,), {}) == digest_args((cyclic,), {})


def test_external_id_is_deterministic_per_identity_and_index() -> None:
    """external_id is a UUID5 that is equal for equal input and differs otherwise."""
    first = external_id(ident(), 0)
    assert uuid.UUID(first).version == 5
    assert external_id(ident(), 0) == first
    others = [
        external_id(ident(), 1),
        external_id(ident(job="job-2"), 0),
        external_id(ident(key="k2"), 0),
        external_id(ident(run=2), 0),
        external_id(ident(step=2), 0),
        external_id(ident(action="other"), 0),
        external_id(ident(key="k1.1", step=1), 0),
    ]
    assert len({first, *others}) == len(others) + 1
