"""JSON lines in and out, shared by the local batch runner and the Flink job."""

import json

import pytest
from pydantic import BaseModel

from flink_agents.runtime._records import BadRecord, parse_json_object, to_json_line


class Answer(BaseModel):
    result: float
    steps: list[str]


def test_structured_outputs_become_json_objects_not_their_repr():
    line = to_json_line({"answer": Answer(result=20.0, steps=["4 * 5"]), "n": 1})
    assert json.loads(line) == {"answer": {"result": 20.0, "steps": ["4 * 5"]}, "n": 1}
    assert "\n" not in line


def test_other_values_fall_back_to_their_string():
    assert json.loads(to_json_line({"at": {1, 2} and 3j})) == {"at": "3j"}


@pytest.mark.parametrize(
    ("text", "reason"),
    [("{oops", "invalid JSON"), ("[1, 2]", "expected a JSON object, got list")],
)
def test_bad_lines_say_why(text, reason):
    with pytest.raises(BadRecord, match=reason.replace("[", r"\[")):
        parse_json_object(text)
