"""The scripted LLM stand-in, over real HTTP with the real openai client."""

from __future__ import annotations

import json
import math
import select
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import openai
import pydantic
import pytest

from flink_agents.testing.llm_server import (
    STAND_IN_FINGERPRINT,
    STAND_IN_OWNER,
    RecordedCall,
    Rule,
    ScriptedLLMServer,
    ToolCallSpec,
)

REPO = Path(__file__).resolve().parents[2]


def client_for(server: ScriptedLLMServer, **kwargs) -> openai.OpenAI:
    kwargs.setdefault("max_retries", 0)
    return openai.OpenAI(base_url=server.base_url, api_key="anything", **kwargs)


def ask(client: openai.OpenAI, text: str, **kwargs):
    return client.chat.completions.create(
        model=kwargs.pop("model", "test-model"),
        messages=[{"role": "user", "content": text}],
        **kwargs,
    )


def raw_request(server: ScriptedLLMServer, method: str, path: str, body: bytes | None = None):
    """Status and JSON body of a request made without the openai client."""
    url = server.base_url.removesuffix("/v1") + path
    request = urllib.request.Request(url, data=body, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_matching_rule_answers_its_text_labelled_as_a_stand_in(llm_server):
    llm_server.add_rule(Rule(last_user_contains="REFUND", reply_text="You asked: {last_user}"))

    reply = ask(client_for(llm_server), "I want a refund now", model="gpt-test")

    assert reply.choices[0].message.content == "You asked: I want a refund now"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.model == "gpt-test"
    assert reply.object == "chat.completion" and reply.id and isinstance(reply.created, int)
    assert reply.system_fingerprint == STAND_IN_FINGERPRINT
    assert reply.usage.prompt_tokens == 5
    assert reply.usage.completion_tokens == 7
    assert reply.usage.total_tokens == 12


def test_no_match_answers_the_default_reply(llm_server_factory):
    server = llm_server_factory(default_reply="default for {last_user}")
    assert ask(client_for(server), "anything").choices[0].message.content == "default for anything"


def test_without_a_default_reply_an_unmatched_request_is_a_bad_request(llm_server_factory):
    server = llm_server_factory(
        [Rule(last_user_contains="known", reply_text="ok")], default_reply=None
    )
    with pytest.raises(openai.BadRequestError, match="no scripted rule matches"):
        ask(client_for(server), "something else")


def test_rules_are_tried_in_order_and_times_limits_them(llm_server):
    llm_server.add_rule(Rule(last_user_contains="order", reply_text="first", times=2))
    llm_server.add_rule(Rule(last_user_matches=r"^place an? order", reply_text="second"))
    llm_server.add_rule(Rule(reply_text="fallback"))
    client = client_for(llm_server)

    answers = [ask(client, "place an order").choices[0].message.content for _ in range(4)]
    answers.append(ask(client, "something else").choices[0].message.content)

    assert answers == ["first", "first", "second", "second", "fallback"]


def test_conditions_on_system_prompt_tools_and_model(llm_server):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    llm_server.add_rule(Rule(system_contains="pirate", model="m1", reply_text="arr"))
    llm_server.add_rule(Rule(has_tools=True, reply_text="with tools"))
    llm_server.add_rule(Rule(has_tools=False, reply_text="no tools"))
    client = client_for(llm_server)
    pirate = [
        {"role": "system", "content": "talk like a pirate"},
        {"role": "user", "content": "hi"},
    ]

    def answer(**kwargs) -> str:
        return client.chat.completions.create(**kwargs).choices[0].message.content

    assert answer(model="m1", messages=pirate) == "arr"
    assert answer(model="m2", messages=pirate) == "no tools"
    assert answer(model="m2", messages=pirate, tools=tools) == "with tools"


def test_a_tool_call_round_trip(llm_server):
    llm_server.add_rule(Rule(after_tool="lookup_order", reply_text="The order is {tool_result}."))
    llm_server.add_rule(
        Rule(
            last_user_contains="where is my order",
            has_tools=True,
            reply_tool_calls=[ToolCallSpec("lookup_order", {"order_id": 42})],
        )
    )
    client = client_for(llm_server)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "lookup_order",
                "parameters": {"type": "object", "properties": {"order_id": {"type": "integer"}}},
            },
        }
    ]
    messages: list = [{"role": "user", "content": "Where is my order?"}]

    first = client.chat.completions.create(model="m", messages=messages, tools=tools)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "lookup_order"
    assert json.loads(call.function.arguments) == {"order_id": 42}

    messages.append(choice.message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "shipped"})
    second = client.chat.completions.create(model="m", messages=messages, tools=tools)

    assert second.choices[0].message.content == "The order is shipped."
    assert second.choices[0].finish_reason == "stop"


def test_tool_call_ids_are_unique_across_calls(llm_server):
    llm_server.add_rule(
        Rule(reply_tool_calls=[ToolCallSpec("a", {}), ToolCallSpec("b", {"x": [1, 2]})])
    )
    client = client_for(llm_server)
    ids = [c.id for _ in range(2) for c in ask(client, "go").choices[0].message.tool_calls]
    assert len(set(ids)) == 4


class Verdict(pydantic.BaseModel):
    category: str
    urgent: bool


def test_reply_json_parses_as_structured_output(llm_server):
    llm_server.add_rule(Rule(reply_json={"category": "billing", "urgent": True}))
    client = client_for(llm_server)

    parsed = client.chat.completions.parse(
        model="m",
        messages=[{"role": "user", "content": "classify: my card was charged twice"}],
        response_format=Verdict,
    )

    assert parsed.choices[0].message.parsed == Verdict(category="billing", urgent=True)
    sent = llm_server.calls[-1].request["response_format"]
    assert sent["type"] == "json_schema"


def test_json_object_response_format_is_accepted(llm_server):
    llm_server.add_rule(Rule(reply_json=[1, {"a": None}]))
    reply = ask(client_for(llm_server), "x", response_format={"type": "json_object"})
    assert json.loads(reply.choices[0].message.content) == [1, {"a": None}]


@pytest.mark.parametrize(
    ("status", "exception"),
    [(500, openai.InternalServerError), (429, openai.RateLimitError), (503, openai.APIStatusError)],
)
def test_fail_next_raises_the_matching_openai_error(llm_server, status, exception):
    llm_server.fail_next(1, status=status)
    client = client_for(llm_server)

    with pytest.raises(exception) as raised:
        ask(client, "hello")

    assert raised.value.status_code == status
    assert "fail_next" in raised.value.message
    if status == 429:
        assert raised.value.response.headers["retry-after"] == "0"
    assert ask(client, "hello").choices[0].message.content  # the failure was used up
    assert [c.status for c in llm_server.calls] == [status, 200]


def test_a_retrying_client_recovers_from_injected_failures(llm_server):
    llm_server.add_rule(Rule(reply_text="finally"))
    llm_server.fail_next(1, status=500)
    llm_server.fail_next(1, status=429)

    reply = ask(client_for(llm_server, max_retries=3), "hello")

    assert reply.choices[0].message.content == "finally"
    assert [c.status for c in llm_server.calls] == [500, 429, 200]


def test_delay_next_makes_a_short_timeout_client_time_out(llm_server):
    llm_server.delay_next(1, seconds=3.0)
    client = client_for(llm_server, timeout=0.3)

    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        ask(client, "slow")
    assert time.monotonic() - started < 2.5

    started = time.monotonic()
    ask(client, "fast")  # the delay was used up by the first request
    assert time.monotonic() - started < 1.5


def test_stop_does_not_wait_for_delayed_requests(llm_server_factory):
    server = llm_server_factory()
    server.delay_next(1, seconds=30)
    client = client_for(server, timeout=0.3)
    with pytest.raises(openai.APITimeoutError):
        ask(client, "slow")
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 15  # far from the 30 s hold, even on a loaded machine
    deadline = time.monotonic() + 15
    while server.call_count() == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.call_count() == 1  # the held request was released, not left for 30 s


def test_latency_applies_to_every_request_and_requests_run_concurrently(llm_server_factory):
    server = llm_server_factory(latency_s=0.5)
    client = client_for(server, timeout=10)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            ask(client, "hi")
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=call) for _ in range(6)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started

    assert not errors
    assert 0.5 <= elapsed < 2.5  # six serial answers would take 3 s
    assert server.call_count("chat") == 6


def test_calls_are_recorded_and_counted(llm_server):
    client = client_for(llm_server)
    ask(client, "one")
    client.embeddings.create(model="e", input="two")
    client.models.list()

    calls = llm_server.calls
    assert [c.endpoint for c in calls] == ["chat", "embeddings", "models"]
    assert all(isinstance(c, RecordedCall) and c.status == 200 for c in calls)
    assert calls[0].request["messages"] == [{"role": "user", "content": "one"}]
    assert calls[0].response["choices"][0]["message"]["content"]
    assert calls[0].at <= calls[1].at <= calls[2].at
    assert llm_server.call_count() == 3
    assert llm_server.call_count("chat") == 1
    assert llm_server.call_count("embeddings") == 1
    with pytest.raises(ValueError, match="unknown endpoint"):
        llm_server.call_count("chats")

    calls.clear()  # a copy: the server's log is untouched
    assert llm_server.call_count() == 3


def test_reset_clears_calls_and_pending_failures_but_keeps_rules(llm_server):
    llm_server.add_rule(Rule(reply_text="kept", times=1))
    client = client_for(llm_server)
    ask(client, "x")
    llm_server.fail_next(2)
    llm_server.delay_next(2, seconds=10)

    llm_server.reset()

    assert llm_server.calls == []
    assert ask(client_for(llm_server, timeout=2), "x").choices[0].message.content == "kept"
    assert llm_server.call_count() == 1


def test_models_are_listed_as_stand_ins(llm_server):
    llm_server.add_rule(Rule(model="custom-model", reply_text="x"))
    models = client_for(llm_server).models.list().data
    assert {m.id for m in models} == {"scripted-stand-in", "custom-model"}
    assert {m.owned_by for m in models} == {STAND_IN_OWNER}


def test_embeddings_are_deterministic_unit_vectors_of_the_configured_size(llm_server_factory):
    server = llm_server_factory(embedding_dim=16)
    client = client_for(server)

    first = client.embeddings.create(model="e", input=["The cat sat", "a dog"])
    again = client.embeddings.create(model="e", input="the CAT sat", encoding_format="float")
    wider = client.embeddings.create(model="e", input="the cat sat", dimensions=64)

    vectors = [d.embedding for d in first.data]
    assert [d.index for d in first.data] == [0, 1]
    assert all(len(v) == 16 for v in vectors)
    assert all(math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-5) for v in vectors)
    assert again.data[0].embedding == pytest.approx(vectors[0], abs=1e-6)
    assert vectors[0] != pytest.approx(vectors[1], abs=1e-6)
    assert len(wider.data[0].embedding) == 64
    assert first.usage.prompt_tokens == first.usage.total_tokens == 5
    assert first.model == "e"


def test_streaming_is_rejected_with_a_clear_message(llm_server):
    with pytest.raises(openai.BadRequestError, match="stream=true is not supported"):
        ask(client_for(llm_server), "hi", stream=True)


def test_malformed_requests_and_unknown_paths(llm_server):
    status, body = raw_request(llm_server, "POST", "/v1/chat/completions", b"{not json")
    assert status == 400 and "not valid JSON" in body["error"]["message"]

    status, body = raw_request(llm_server, "POST", "/v1/chat/completions", b'{"model": "m"}')
    assert status == 400 and "'messages'" in body["error"]["message"]

    status, body = raw_request(llm_server, "POST", "/v1/embeddings", b'{"model": "m"}')
    assert status == 400 and "'input'" in body["error"]["message"]

    status, body = raw_request(llm_server, "GET", "/v1/nothing-here")
    assert status == 404 and body["error"]["code"] == "unknown_url"

    assert [c.status for c in llm_server.calls] == [400, 400, 400]
    assert llm_server.calls[0].request == {"_unparsed": "{not json"}


def test_the_server_is_quiet_on_stderr(llm_server, capfd):
    client = client_for(llm_server, timeout=0.3)
    ask(client, "hi")
    raw_request(llm_server, "GET", "/nowhere")
    llm_server.delay_next(1, seconds=1)
    with pytest.raises(openai.APITimeoutError):
        ask(client, "hung up on")
    time.sleep(1)  # the held answer is written to a closed connection
    assert capfd.readouterr().err == ""


def test_a_call_from_another_process(llm_server):
    llm_server.add_rule(Rule(last_user_contains="ping", reply_text="pong"))
    child = textwrap.dedent(
        f"""
        import json, urllib.request
        body = json.dumps({{"model": "m", "messages": [{{"role": "user", "content": "ping"}}]}})
        request = urllib.request.Request(
            "{llm_server.base_url}/chat/completions", data=body.encode(),
            headers={{"Content-Type": "application/json"}},
        )
        reply = json.load(urllib.request.urlopen(request, timeout=10))
        print(reply["choices"][0]["message"]["content"])
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "pong"


SCRIPT = """\
default_reply: nothing scripted
latency_s: 0.0
rules:
  - last_user_contains: weather
    reply_tool_calls:
      - name: get_weather
        arguments: {city: Berlin}
  - after_tool: get_weather
    reply_text: "It is {tool_result}."
  - last_user_contains: classify
    reply_json: {label: spam}
    times: 1
"""


def test_from_script_reads_rules_and_settings_from_yaml(tmp_path):
    path = tmp_path / "script.yaml"
    path.write_text(SCRIPT)

    with ScriptedLLMServer.from_script(path, embedding_dim=8) as server:
        client = client_for(server)
        call = ask(client, "weather please").choices[0].message.tool_calls[0]
        assert (call.function.name, json.loads(call.function.arguments)) == (
            "get_weather",
            {"city": "Berlin"},
        )
        assert json.loads(ask(client, "classify this").choices[0].message.content) == {
            "label": "spam"
        }
        assert ask(client, "classify this").choices[0].message.content == "nothing scripted"
        assert len(client.embeddings.create(model="e", input="x").data[0].embedding) == 8
    assert server.rules[0].reply_tool_calls == (ToolCallSpec("get_weather", {"city": "Berlin"}),)


def test_scripts_and_rules_are_validated():
    with pytest.raises(ValueError, match="exactly one"):
        Rule(last_user_contains="x")
    with pytest.raises(ValueError, match="exactly one"):
        Rule(reply_text="a", reply_json={"b": 1})
    with pytest.raises(ValueError, match="times"):
        Rule(reply_text="a", times=0)
    with pytest.raises(ValueError, match=r"rule 1: unknown fields \['reply'\]"):
        ScriptedLLMServer.from_script([{"reply_text": "ok"}, {"reply": "typo"}])
    with pytest.raises(ValueError, match="unknown script keys"):
        ScriptedLLMServer.from_script({"rules": [], "latency": 1})


def test_the_cli_subcommand_serves_a_script_until_terminated(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps([{"last_user_contains": "hello", "reply_text": "hi from cli"}]))
    process = subprocess.Popen(
        [sys.executable, "-m", "flink_agents", "llm-server", "--port", "0", "--script", str(path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([process.stdout], [], [], 30)
        assert ready, "no banner within 30 s"
        banner = process.stdout.readline()
        assert banner.startswith("TEST STAND-IN: scripted OpenAI-compatible server at http://")
        assert banner.rstrip().endswith("/v1 (not a real model)")
        base_url = banner.split(" at ", 1)[1].split(" ", 1)[0]

        client = openai.OpenAI(base_url=base_url, api_key="anything", max_retries=0)
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hello there"}]
        )
        assert reply.choices[0].message.content == "hi from cli"
        assert reply.system_fingerprint == STAND_IN_FINGERPRINT
    finally:
        process.terminate()
        returncode = process.wait(timeout=10)
    assert returncode == 0, process.stderr.read()
