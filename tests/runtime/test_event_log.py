"""The event log: its records, levels, payload limit, rolled files, and that secrets never
reach it."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from flink_agents.api import ChatMessage, ChatRequestEvent, ImagePart, InputEvent, OutputEvent
from flink_agents.runtime._event_log import (
    REDACTED,
    CallbackSink,
    EventLog,
    EventLogLevel,
    Redactor,
)

FAKE_KEY = "sk-test-4f9a8b7c6d5e4f3a2b1c"


def _log(level="standard", **kwargs):
    lines: list[str] = []
    log = EventLog(
        CallbackSink(lines.append),
        level,
        job="job-1",
        redactor=kwargs.pop("redactor", Redactor()),
        clock=lambda: 1700000000.5,
        **kwargs,
    )
    return log, lines


def _records(lines):
    return [json.loads(line) for line in lines]


def _one_run(log):
    log.run_started("user-1", 3, {"text": "hi"})
    log.event("user-1", 3, None, InputEvent(input={"text": "hi"}))
    log.action_started("user-1", 3, 0, "reply")
    log.event("user-1", 3, 0, OutputEvent(output="hello"), source="reply")
    log.action_finished("user-1", 3, 0, "reply", "succeeded", duration_ms=1.23456, durable_calls=1)
    log.run_finished("user-1", 3, "succeeded", duration_ms=2.0)


def test_every_record_carries_identity_timing_and_outcome():
    log, lines = _log()
    _one_run(log)
    records = _records(lines)
    assert [r["kind"] for r in records] == [
        "run_started",
        "event",
        "action_started",
        "event",
        "action_finished",
        "run_finished",
    ]
    for record in records:
        assert (record["v"], record["job"], record["key"], record["run"]) == (
            1,
            "job-1",
            "user-1",
            3,
        )
        assert record["ts"] == 1700000000500
    assert records[0]["input"] == {"text": "hi"}
    assert records[1]["event_type"] == "InputEvent"
    assert records[1]["event"]["input"] == {"text": "hi"}
    assert "step" not in records[1]
    assert records[3].items() >= {"step": 0, "source": "reply", "event_type": "OutputEvent"}.items()
    assert (
        records[4].items()
        >= {
            "action": "reply",
            "outcome": "succeeded",
            "duration_ms": 1.235,
            "durable_calls": 1,
        }.items()
    )
    assert records[5]["outcome"] == "succeeded"


def test_a_failure_names_its_error():
    log, lines = _log()
    log.action_finished("k", 1, 2, "act", "failed", error=ValueError("bad input"))
    log.run_finished("k", 1, "error_output", error="gave up")
    records = _records(lines)
    assert records[0]["error"] == "ValueError: bad input"
    assert records[1].items() >= {"outcome": "error_output", "error": "gave up"}.items()


def test_off_writes_nothing_and_opens_no_file(tmp_path):
    log, lines = _log("off")
    assert not log.enabled
    _one_run(log)
    assert lines == []
    directory = tmp_path / "events"
    EventLog.to_directory(directory, "off").close()
    assert not directory.exists()


def test_standard_truncates_payloads_and_verbose_keeps_them():
    long_text = "x" * 500
    log, lines = _log("standard", max_payload_chars=100)
    log.event("k", 1, 0, OutputEvent(output=long_text))
    event = _records(lines)[0]["event"]
    assert isinstance(event, str) and len(event) < 150
    assert event.endswith("more chars)")

    log, lines = _log("verbose", max_payload_chars=100)
    log.event("k", 1, 0, OutputEvent(output=long_text))
    assert _records(lines)[0]["event"]["output"] == long_text

    log, lines = _log("standard", max_payload_chars=100)
    log.event("k", 1, 0, OutputEvent(output="short"))
    assert _records(lines)[0]["event"]["output"] == "short"  # small payloads stay structured


def test_an_image_in_an_event_is_logged_by_its_size_not_its_bytes():
    log, lines = _log("verbose")
    image = ImagePart(data=b"\x89PNG\r\n\x1a\n" + bytes(1000))
    request = ChatRequestEvent(
        model="m", messages=[ChatMessage(role="user", content=["Look", image])]
    )
    log.event("user-1", 3, 0, request, source="ask")
    [record] = _records(lines)
    assert record["event"]["messages"][0]["content"] == [
        {"type": "text", "text": "Look"},
        {
            "type": "image",
            "url": None,
            "data": "<1008 bytes>",
            "mime_type": "image/png",
            "detail": None,
        },
    ]


def test_level_names_are_checked():
    assert EventLog(None, "verbose").level is EventLogLevel.VERBOSE
    with pytest.raises(ValueError):
        EventLog(None, "chatty")


class Request(BaseModel):
    prompt: str
    api_key: str


def test_secrets_never_appear(monkeypatch, tmp_path):
    """A fake key in a secret-looking environment variable, in a field named like a
    secret, inside free text and inside a long payload cut at ``standard``: it is in none
    of the lines written to the files."""
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to search for
    log = EventLog.to_directory(tmp_path, "standard", job="j", max_payload_chars=200)
    log.run_started("k", 1, {"password": "hunter2-hunter2", "note": f"key is {FAKE_KEY}"})
    log.event("k", 1, 0, InputEvent(input=Request(prompt="hello", api_key=FAKE_KEY)))
    log.event("k", 1, 0, OutputEvent(output="y" * 140 + FAKE_KEY + "z" * 100))
    log.action_finished("k", 1, 0, "call", "failed", error=RuntimeError(f"401 for {FAKE_KEY}"))
    log.close()
    text = "".join(path.read_text() for path in tmp_path.iterdir())
    assert FAKE_KEY not in text
    assert FAKE_KEY[:12] not in text  # not even a truncated piece of it
    assert "hunter2" not in text
    records = _records(text.splitlines())
    assert records[0]["input"]["password"] == REDACTED
    assert records[0]["input"]["note"] == f"key is {REDACTED}"
    assert records[1]["event"]["input"] == {"prompt": "hello", "api_key": REDACTED}
    assert isinstance(records[2]["event"], str)  # cut where the key was: it is gone anyway
    assert records[3]["error"] == f"RuntimeError: 401 for {REDACTED}"


def test_redactor_keeps_numbers_and_empty_secret_fields():
    redactor = Redactor([FAKE_KEY])
    assert redactor.redact(
        {"prompt_tokens": 12, "api_key": "", "token": None, "nested": [f"a{FAKE_KEY}b"]}
    ) == {"prompt_tokens": 12, "api_key": "", "token": None, "nested": [f"a{REDACTED}b"]}


def test_redactor_from_environment_picks_secret_looking_names():
    redactor = Redactor.from_environment(
        {"MY_SECRET": "s3cr3t-value", "DB_PASSWORD": "pw-123456", "HOME": "/home/someone"}
    )
    assert redactor.redact("s3cr3t-value pw-123456 /home/someone") == "*** *** /home/someone"


def test_files_roll_and_stay_bounded(tmp_path):
    log = EventLog.to_directory(
        tmp_path, "verbose", max_bytes=2000, backup_count=2, redactor=Redactor()
    )
    for sequence in range(200):
        log.event("k", sequence, 0, OutputEvent(output="p" * 50))
    log.close()
    files = sorted(path.name for path in tmp_path.iterdir())
    assert files == ["events.jsonl", "events.jsonl.1", "events.jsonl.2"]
    assert all(path.stat().st_size <= 2000 for path in tmp_path.iterdir())
    newest = _records((tmp_path / "events.jsonl").read_text().splitlines())
    assert newest[-1]["run"] == 199
