"""The scripted LLM stand-in's tools for spend tests: Retry-After, usage overrides, rate limits.

Over real HTTP, with the real openai client where it parses what is sent, and with urllib where
a header must be seen as sent (the openai client would retry).
"""

from __future__ import annotations

import json
import re
import select
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import openai
import pytest

from flink_agents.testing._llm_script import RequestWindow
from flink_agents.testing.llm_server import Rule, ScriptedLLMServer

REPO = Path(__file__).resolve().parents[2]


def client_for(server: ScriptedLLMServer, **kwargs) -> openai.OpenAI:
    kwargs.setdefault("max_retries", 0)
    return openai.OpenAI(base_url=server.base_url, api_key="anything", **kwargs)


def ask(client: openai.OpenAI, text: str):
    return client.chat.completions.create(
        model="test-model", messages=[{"role": "user", "content": text}]
    )


def raw_chat(base_url: str, text: str = "hello there") -> tuple[int, dict[str, str], dict]:
    """Status, headers and JSON body of one chat request, sent once (no retries)."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]})
    request = urllib.request.Request(
        f"{base_url}/chat/completions",
        data=body.encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


# -- Retry-After on injected failures ----------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "retry_after", "header"),
    [(429, 2, "2"), (429, 2.0, "2"), (503, 0.25, "0.25"), (429, 0.00001, "0.00001")],
)
def test_fail_next_sends_the_given_retry_after(llm_server, status, retry_after, header):
    llm_server.fail_next(1, status=status, retry_after=retry_after)

    code, headers, body = raw_chat(llm_server.base_url)

    assert (code, headers["Retry-After"]) == (status, header)
    assert "fail_next" in body["error"]["message"]
    assert llm_server.rejected_count() == 0  # not the rate limit's doing


def test_fail_next_keeps_its_defaults_a_429_says_0_and_a_500_says_nothing(llm_server):
    llm_server.fail_next(1, status=429)
    llm_server.fail_next(1, status=500)

    assert raw_chat(llm_server.base_url)[1]["Retry-After"] == "0"
    assert "Retry-After" not in raw_chat(llm_server.base_url)[1]


@pytest.mark.parametrize("retry_after", [-1, -0.001, float("nan"), float("inf")])
def test_fail_next_rejects_a_retry_after_that_is_not_a_finite_non_negative_number(retry_after):
    with pytest.raises(ValueError, match="retry_after"):
        ScriptedLLMServer().fail_next(1, status=429, retry_after=retry_after)


# -- usage overrides ---------------------------------------------------------------------------


def test_a_rule_reports_its_usage_override_with_cached_tokens_as_openai_does(llm_server):
    usage = {"prompt_tokens": 1200, "completion_tokens": 30, "cached_tokens": 1024}
    llm_server.add_rule(Rule(reply_text="ok", usage=usage))

    reported = ask(client_for(llm_server), "hello").usage

    assert (reported.prompt_tokens, reported.completion_tokens) == (1200, 30)
    assert reported.total_tokens == 1230
    assert reported.prompt_tokens_details.cached_tokens == 1024


def test_a_partial_override_keeps_the_word_counts_for_the_rest(llm_server):
    llm_server.add_rule(Rule(reply_text="two words", usage={"completion_tokens": 500}))

    reported = ask(client_for(llm_server), "three words here").usage

    assert (reported.prompt_tokens, reported.completion_tokens, reported.total_tokens) == (
        3,
        500,
        503,
    )
    assert reported.prompt_tokens_details is None


def test_answers_without_an_override_report_exactly_what_they_always_did(llm_server):
    llm_server.add_rule(Rule(last_user_contains="rule", reply_text="a scripted reply"))

    by_rule = raw_chat(llm_server.base_url, "answered by a rule")[2]["usage"]
    by_default = raw_chat(llm_server.base_url, "answered by default")[2]["usage"]

    assert by_rule == {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7}
    assert list(by_default) == ["prompt_tokens", "completion_tokens", "total_tokens"]


@pytest.mark.parametrize(
    ("usage", "message"),
    [
        ({"prompt": 1}, r"unknown keys \['prompt'\]"),
        ({"total_tokens": 1}, r"unknown keys \['total_tokens'\]"),
        ({"cached_tokens": -1}, "non-negative int"),
        ({"prompt_tokens": 1.5}, "non-negative int"),
        ({"completion_tokens": True}, "non-negative int"),
        ([("prompt_tokens", 1)], "must be a mapping"),
    ],
)
def test_usage_overrides_are_validated_when_the_rule_is_made(usage, message):
    with pytest.raises(ValueError, match=message):
        Rule(reply_text="x", usage=usage)


def test_a_rule_keeps_its_own_copy_of_the_usage_it_was_given():
    usage = {"prompt_tokens": 1}
    rule = Rule(reply_text="x", usage=usage)
    usage["prompt_tokens"] = -5
    assert rule.usage == {"prompt_tokens": 1}


SCRIPT = """\
requests_per_minute: 600
rules:
  - last_user_contains: cached
    reply_text: from the cache
    usage: {prompt_tokens: 2048, cached_tokens: 1920}
"""


def test_a_script_sets_usage_and_the_rate_limit(tmp_path):
    path = tmp_path / "script.yaml"
    path.write_text(SCRIPT)

    with ScriptedLLMServer.from_script(path) as server:
        reported = ask(client_for(server), "cached please").usage
        assert server.requests_per_minute == 600
    assert (reported.prompt_tokens, reported.prompt_tokens_details.cached_tokens) == (2048, 1920)
    with pytest.raises(ValueError, match=r"rule 0: Rule.usage: unknown keys \['cached'\]"):
        ScriptedLLMServer.from_script([{"reply_text": "x", "usage": {"cached": 1}}])


# -- the rate limit ----------------------------------------------------------------------------


def test_the_rate_limit_admits_its_share_of_a_short_window_then_answers_429(llm_server):
    llm_server.set_rate_limit(120, window_s=2.0)  # 4 requests per 2 s

    started = time.monotonic()
    answers = [raw_chat(llm_server.base_url) for _ in range(6)]
    elapsed = time.monotonic() - started

    assert [status for status, _, _ in answers] == [200, 200, 200, 200, 429, 429]
    for _, headers, body in answers[4:]:
        assert body["error"]["type"] == "requests"
        assert body["error"]["code"] == "rate_limit_exceeded"
        assert re.fullmatch(r"\d+(\.\d{1,3})?", headers["Retry-After"])
        # until the first request, made after `started`, is 2 s old: rounded up, never over 2
        assert 2.0 - elapsed <= float(headers["Retry-After"]) <= 2.0
    assert [call.status for call in llm_server.calls] == [200, 200, 200, 200, 429, 429]
    assert llm_server.rejected_count() == 2

    time.sleep(float(answers[-1][1]["Retry-After"]))  # the oldest request leaves the window

    assert raw_chat(llm_server.base_url)[0] == 200
    assert llm_server.rejected_count() == 2


def test_a_retrying_openai_client_waits_out_the_limit_and_succeeds(llm_server):
    llm_server.set_rate_limit(240, window_s=0.5)  # 2 requests per 0.5 s
    client = client_for(llm_server, max_retries=2)

    started = time.monotonic()
    replies = [ask(client, "hello") for _ in range(3)]

    assert all(reply.choices[0].message.content for reply in replies)
    assert [call.status for call in llm_server.calls] == [200, 200, 429, 200]
    assert llm_server.rejected_count() == 1
    assert time.monotonic() - started >= 0.4  # the client slept for the Retry-After it was sent


def test_only_successful_answers_use_up_the_limit(llm_server):
    llm_server.set_rate_limit(60, window_s=2.0)  # 2 requests per 2 s
    llm_server.fail_next(1, status=500)
    client = client_for(llm_server)

    with pytest.raises(openai.InternalServerError):
        ask(client, "injected failure")
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], stream=True
        )
    ask(client, "counted")
    ask(client, "counted")
    with pytest.raises(openai.RateLimitError):
        ask(client, "over the limit")

    assert [call.status for call in llm_server.calls] == [500, 400, 200, 200, 429]


def test_embeddings_and_models_are_never_limited(llm_server):
    llm_server.set_rate_limit(30, window_s=2.0)  # 1 request per 2 s
    client = client_for(llm_server)
    ask(client, "the one chat request")

    for _ in range(3):
        client.embeddings.create(model="e", input="text")
        client.models.list()

    with pytest.raises(openai.RateLimitError):
        ask(client, "the second chat request")
    assert llm_server.rejected_count() == 1


def test_reset_empties_the_window_and_none_lifts_the_limit(llm_server_factory):
    server = llm_server_factory(requests_per_minute=1)
    client = client_for(server)
    ask(client, "first")
    with pytest.raises(openai.RateLimitError) as raised:
        ask(client, "second")
    assert 59 < float(raised.value.response.headers["retry-after"]) <= 60

    server.reset()
    assert (server.rejected_count(), server.requests_per_minute) == (0, 1)
    ask(client, "admitted again")

    server.set_rate_limit(None)
    assert server.requests_per_minute is None
    for _ in range(3):
        ask(client, "no limit")


@pytest.mark.parametrize(
    ("requests_per_minute", "window_s", "message"),
    [
        (0, 60.0, "admit no request"),
        (1, 1.0, "admit no request"),
        (60, 0.0, "window_s"),
        (1.5, 60.0, "must be an int"),
    ],
)
def test_a_rate_limit_that_admits_nothing_is_refused(requests_per_minute, window_s, message):
    with pytest.raises(ValueError, match=message):
        ScriptedLLMServer().set_rate_limit(requests_per_minute, window_s=window_s)


def test_the_constructor_refuses_a_rate_limit_of_zero():
    with pytest.raises(ValueError, match="admit no request"):
        ScriptedLLMServer(requests_per_minute=0)


def test_the_window_counts_admissions_and_takes_back_released_ones():
    window = RequestWindow(120, window_s=2.0)  # 4 per 2 s, times handed in

    assert [window.admit(t) for t in (0.0, 0.1, 0.2, 0.3)] == [None] * 4
    assert window.admit(0.5) == pytest.approx(1.5)
    window.release(0.1)
    assert window.admit(0.6) is None
    assert window.admit(0.7) == pytest.approx(1.3)
    assert window.admit(2.0) is None  # the request of 0.0 left the window


def test_serve_runs_with_a_rate_limit():
    code = "from flink_agents.testing.llm_server import serve; serve(requests_per_minute=1)"
    process = subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        ready, _, _ = select.select([process.stdout], [], [], 30)
        assert ready, "no banner within 30 s"
        base_url = process.stdout.readline().split(" at ", 1)[1].split(" ", 1)[0]
        assert "at most 1 chat requests a minute" in process.stdout.readline()

        assert [raw_chat(base_url)[0] for _ in range(2)] == [200, 429]
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0
