"""Event ids and input events are made on every run: built fast, they must still be what the
standard constructors make."""

from __future__ import annotations

import json
import pickle
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flink_agents._ids import ACTION_LOG_NAMESPACE as NAMESPACE
from flink_agents._ids import input_event_id, key_text, new_event_id, uuid_from_bits
from flink_agents.api import InputEvent
from flink_agents.runtime.internal import input_event


@given(st.integers(min_value=0, max_value=2**128 - 1), st.sampled_from([1, 3, 4, 5]))
def test_uuid_from_bits_is_the_standard_uuid(bits, version):
    made = uuid_from_bits(bits, version)
    standard = uuid.UUID(int=bits, version=version)
    assert made == standard and hash(made) == hash(standard) and str(made) == str(standard)
    assert made.version == version and made.variant == uuid.RFC_4122
    assert pickle.loads(pickle.dumps(made)) == standard


def test_event_ids_are_random_version_4_uuids():
    ids = {new_event_id() for _ in range(10_000)}
    assert len(ids) == 10_000
    assert all(i.version == 4 and i.variant == uuid.RFC_4122 for i in ids)
    for made in list(ids)[:100]:  # the standard UUID of the same value, in every respect
        standard = uuid.UUID(str(made))
        assert made == standard and hash(made) == hash(standard)
        assert made.is_safe == standard.is_safe and pickle.loads(pickle.dumps(made)) == made
    assert InputEvent(input=1).id.version == 4


@given(st.one_of(st.text(max_size=8), st.integers()), st.integers(min_value=1, max_value=10**9))
def test_input_event_ids_fold_the_run_into_the_uuid5_of_job_and_key(key, sequence):
    name = json.dumps(["input", "job", key_text(key)])
    base = uuid.uuid5(NAMESPACE, name).int
    expected = uuid.UUID(int=base ^ sequence, version=5)
    made = input_event_id("job", key, sequence)
    assert made == expected and made.version == 5 and made.variant == uuid.RFC_4122


@given(
    st.lists(st.text(max_size=4), min_size=1, max_size=5, unique=True),
    st.lists(st.integers(min_value=0, max_value=2**62 - 1), min_size=1, max_size=20, unique=True),
)
def test_input_event_ids_differ_for_every_key_and_run_and_job(keys, sequences):
    ids = {input_event_id(job, key, n) for job in ("a", "b") for key in keys for n in sequences}
    assert len(ids) == 2 * len(keys) * len(sequences)


@pytest.mark.parametrize("given", [None, uuid.UUID(int=12345, version=4)])
def test_input_event_is_the_validated_event(given):
    record = {"text": "hi", "n": [1, 2]}
    made = input_event(record, given)
    validated = InputEvent(input=record) if given is None else InputEvent(id=given, input=record)
    assert type(made) is InputEvent
    assert made.input is record and isinstance(made.id, uuid.UUID)
    if given is not None:
        assert made.id == given
    assert made == validated.model_copy(update={"id": made.id})
    assert made.model_fields_set == validated.model_fields_set
    assert made.model_dump() == {"id": made.id, "input": record}
    assert pickle.loads(pickle.dumps(made)) == made
    assert made.__pydantic_extra__ is None and made.__pydantic_private__ is None
    assert made.model_copy(deep=True) == made
