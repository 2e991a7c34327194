"""OpenAIChatModel against the scripted server (real HTTP, real openai client), and the
built-in chat/tool flow through an agent on the local runner."""

import logging
import pickle
import threading
import time

import pytest

from flink_agents.agents import context_retrieval_action, tool_call_action
from flink_agents.api import (
    ActionExecutionError,
    AgentsExecutionEnvironment,
    ChatMessage,
    ChatModelError,
    FlinkAgentsError,
    MessageRole,
    StructuredOutputError,
    TokenUsage,
    Tool,
)
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.plan import compile_agent, plan_from_yaml
from flink_agents.runtime import LocalRunner
from flink_agents.runtime._call_loop import CallLoop
from flink_agents.testing.llm_server import Rule, ToolCallSpec
from tests.integrations import chat_agents as agents

SECRET = "sk-test-do-not-leak-4242"


def user(text: str) -> list[ChatMessage]:
    return [ChatMessage(role=MessageRole.USER, content=text)]


def scripted_model(server, **options) -> OpenAIChatModel:
    settings = dict(base_url=server.base_url, api_key=SECRET, retry_initial_wait=0.01)
    return OpenAIChatModel("scripted", **{**settings, **options})


def wait_for_calls(server, count: int, timeout: float = 5.0) -> list:
    deadline = time.monotonic() + timeout
    while server.call_count("chat") < count and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.call_count("chat") == count
    return server.calls


@pytest.fixture
def scripted_env(monkeypatch, llm_server):
    """The environment the test agents' resources read: server address and key."""
    monkeypatch.setenv("TEST_LLM_URL", llm_server.base_url)
    monkeypatch.setenv("TEST_LLM_KEY", SECRET)
    return llm_server


# --- one call -----------------------------------------------------------------------------


def test_reply_and_token_usage_per_response_and_per_instance(llm_server):
    llm_server.add_rule(Rule(last_user_contains="hello", reply_text="hi there, {last_user}"))
    model = scripted_model(llm_server)
    first = model.chat(user("hello"))
    second = model.chat(user("hello again"))
    assert first.message == ChatMessage(role=MessageRole.ASSISTANT, content="hi there, hello")
    assert first.usage.total_tokens > 0
    assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens
    assert model.usage == first.usage + second.usage
    [call, _] = llm_server.calls
    assert call.request["model"] == "scripted"
    assert call.request["messages"] == [{"role": "user", "content": "hello"}]


def test_usage_totals_are_thread_safe(llm_server):
    llm_server.add_rule(Rule(reply_text="one two three"))
    model = scripted_model(llm_server)
    responses = []

    def work() -> None:
        for _ in range(5):
            responses.append(model.chat(user("count me")))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = sum((r.usage for r in responses), TokenUsage())
    assert len(responses) == 20 and model.usage == expected


def test_tools_are_offered_and_tool_calls_parsed(llm_server):
    llm_server.add_rule(
        Rule(has_tools=True, reply_tool_calls=[ToolCallSpec("add", {"a": 2, "b": 3})])
    )
    model = scripted_model(llm_server)
    response = model.chat(user("2+3?"), tools=[Tool.from_function(agents.add).metadata])
    [call] = response.message.tool_calls
    assert (call.name, call.arguments) == ("add", {"a": 2, "b": 3})
    assert response.finish_reason == "tool_calls" and response.structured is None
    [offered] = llm_server.calls[0].request["tools"]
    assert offered["type"] == "function"
    assert offered["function"]["name"] == "add"
    assert offered["function"]["parameters"]["required"] == ["a", "b"]


def test_structured_output_is_validated_into_the_pydantic_model(llm_server):
    llm_server.add_rule(Rule(reply_json={"result": 5, "explanation": "2 plus 3"}))
    response = scripted_model(llm_server).chat(user("2+3?"), output_schema=agents.Calculation)
    assert response.structured == agents.Calculation(result=5, explanation="2 plus 3")
    response_format = llm_server.calls[0].request["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "Calculation"
    assert response_format["json_schema"]["schema"]["required"] == ["result", "explanation"]


def test_structured_output_that_does_not_match_is_a_clear_error(llm_server):
    llm_server.add_rule(Rule(reply_json={"result": "five"}))
    with pytest.raises(StructuredOutputError) as caught:
        scripted_model(llm_server).chat(user("2+3?"), output_schema=agents.Calculation)
    message = str(caught.value)
    assert "'scripted'" in message and "Calculation" in message
    assert "result" in message and "explanation" in message


# --- retries ------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [500, 503, 429])
def test_retries_server_errors_and_rate_limits_then_succeeds(llm_server, status):
    llm_server.add_rule(Rule(reply_text="finally"))
    llm_server.fail_next(2, status=status)
    response = scripted_model(llm_server, max_retries=3).chat(user("hi"))
    assert response.message.content == "finally"
    assert [c.status for c in llm_server.calls] == [status, status, 200]


def test_retries_a_timeout_then_succeeds(llm_server, caplog):
    llm_server.add_rule(Rule(reply_text="in time"))
    llm_server.delay_next(1, seconds=1.0)
    response = scripted_model(llm_server, timeout=0.3).chat(user("hi"))
    assert response.message.content == "in time"
    # The server records the slow call when its delay ends, after the retry was answered.
    calls = wait_for_calls(llm_server, 2)
    assert [c.status for c in sorted(calls, key=lambda c: c.at)] == [200, 200]
    assert "attempt 1 of 4 failed (timed out)" in caplog.text


def test_gives_up_after_the_retries_with_a_clear_error(llm_server):
    llm_server.fail_next(10, status=500)
    with pytest.raises(ChatModelError) as caught:
        scripted_model(llm_server, max_retries=3).chat(user("hi"))
    error = caught.value
    host = llm_server.base_url.split("//")[1].split("/")[0]
    assert (error.model, error.host, error.attempts, error.status) == ("scripted", host, 4, 500)
    assert str(error).startswith(f"chat model 'scripted' at {host} failed after 4 attempts")
    assert "last status: 500" in str(error)
    assert llm_server.call_count("chat") == 4
    copy = pickle.loads(pickle.dumps(error))  # errors travel through the action log
    assert (str(copy), copy.attempts, copy.status) == (str(error), 4, 500)


def test_gives_up_on_timeouts_naming_no_status(llm_server):
    llm_server.add_rule(Rule(reply_text="too late"))
    llm_server.delay_next(3, seconds=1.0)
    with pytest.raises(ChatModelError) as caught:
        scripted_model(llm_server, timeout=0.2, max_retries=1).chat(user("hi"))
    assert caught.value.attempts == 2 and caught.value.status is None
    assert "last status: none (timed out)" in str(caught.value)
    wait_for_calls(llm_server, 2)


def test_a_bad_request_is_not_retried(llm_server):
    llm_server.fail_next(1, status=400)
    with pytest.raises(ChatModelError) as caught:
        scripted_model(llm_server, max_retries=3).chat(user("hi"))
    assert (caught.value.attempts, caught.value.status) == (1, 400)
    assert llm_server.call_count("chat") == 1


def test_achat_replies_retries_and_gives_up_as_chat_does(llm_server):
    """``achat`` (the async client, what the built-in action awaits on the engine's loop):
    several calls on one loop, a retried one among them, then closed on that loop."""
    llm_server.add_rule(Rule(reply_text="hi there, {last_user}"))
    model = scripted_model(llm_server, max_retries=3)
    loop = CallLoop()

    async def ask(text):
        return await model.achat(user(text))

    def on_loop(text):
        return loop.submit(ask, (text,), {}, None, None, "ask").result(timeout=30)

    try:
        first, second = on_loop("one"), on_loop("two")
        llm_server.fail_next(2, status=503)
        third = on_loop("three")
        llm_server.fail_next(10, status=500)
        with pytest.raises(ChatModelError) as caught:
            on_loop("four")
        model.close()  # while the loop runs, as the engine closes resources
    finally:
        loop.close()
    assert [r.message.content for r in (first, second, third)] == [
        "hi there, one",
        "hi there, two",
        "hi there, three",
    ]
    assert third.attempts == 3
    assert (caught.value.attempts, caught.value.status) == (4, 500)
    assert model.usage == first.usage + second.usage + third.usage
    assert model._async_client.is_closed()


def test_the_built_in_chat_action_awaits_achat_on_the_engines_loop(scripted_env):
    """A chat request answered without tools takes no thread of the pool: the executor is
    never made. Closing the engine closes the model's async client on the loop."""
    scripted_env.add_rule(Rule(reply_text="no tools needed"))
    runner = LocalRunner(agents.WeatherAgent)
    try:
        [output] = runner.run("ana", "hello")
        model = runner.engine.resources.get("llm")
        executor = runner.engine._executor  # (``close`` drops it)
    finally:
        runner.engine.close()
    assert output["text"] == "no tools needed"
    assert executor is None
    assert model._async_client.is_closed()


# --- configuration and secrets ------------------------------------------------------------


def test_model_reads_model_url_and_key_from_the_environment(monkeypatch, llm_server):
    llm_server.add_rule(Rule(reply_text="configured by env"))
    monkeypatch.setenv("OPENAI_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    model = OpenAIChatModel()
    assert model.chat(user("hi")).message.content == "configured by env"
    assert llm_server.calls[0].request["model"] == "env-model"


def test_missing_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(FlinkAgentsError, match="set the environment variable OPENAI_API_KEY"):
        OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1")


def test_the_key_never_shows_in_repr_errors_or_logs(llm_server, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, the openai and HTTP clients' included
    llm_server.fail_next(10, status=500)
    model = scripted_model(llm_server, max_retries=2)
    with pytest.raises(ChatModelError) as caught:
        model.chat(user("hi"))
    with pytest.raises(FlinkAgentsError) as refused:
        model.descriptor()  # a key given in code cannot go into a plan
    assert "retrying" in caplog.text  # the retries were logged...
    texts = [repr(model), str(caught.value), repr(caught.value), str(refused.value), caplog.text]
    assert not [text for text in texts if SECRET in text]  # ...without the key


# --- through an agent ---------------------------------------------------------------------


def test_tool_calling_round_trip_through_an_agent(scripted_env):
    server = scripted_env
    server.add_rule(Rule(after_tool="get_weather", reply_text="It is {tool_result}."))
    server.add_rule(
        Rule(
            last_user_contains="weather",
            reply_tool_calls=[ToolCallSpec("get_weather", {"city": "Lisbon"})],
        )
    )
    runner = LocalRunner(agents.WeatherAgent)
    [output] = runner.run("ana", "What is the weather in Lisbon?")
    assert output["text"] == "It is sunny in Lisbon."
    assert output["tokens"] > 0
    first, second = (c.request for c in server.calls)
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather"]
    assert first["tools"][0]["function"]["description"] == "The current weather of a city."
    assert second["messages"][1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert second["messages"][2] == {
        "role": "tool",
        "content": "sunny in Lisbon",
        "tool_call_id": second["messages"][1]["tool_calls"][0]["id"],
    }
    assert runner.sensory_memory("ana") == {}  # the in-flight chat was cleared with the run


def test_an_async_tool_is_awaited_on_the_engines_loop(scripted_env):
    """The built-in tool action awaits an ``async def`` tool's ``acall`` on the engine's
    event loop (no thread of the pool); the model call goes there too."""
    server = scripted_env
    server.add_rule(Rule(after_tool="get_weather", reply_text="It is {tool_result}."))
    server.add_rule(
        Rule(
            last_user_contains="weather",
            reply_tool_calls=[ToolCallSpec("get_weather", {"city": "Lisbon"})],
        )
    )
    agents.TOOL_THREADS.clear()
    runner = LocalRunner(agents.AsyncWeatherAgent)
    try:
        [output] = runner.run("ana", "What is the weather in Lisbon?")
        executor = runner.engine._executor  # (``close`` drops it)
    finally:
        runner.engine.close()
    assert output["text"] == "It is sunny in Lisbon."
    assert agents.TOOL_THREADS == ["flink-agents-calls"]
    assert executor is None


def test_model_tools_are_used_when_the_request_names_none_and_failures_reach_the_model(
    scripted_env,
):
    server = scripted_env
    server.add_rule(Rule(after_tool="plus", reply_text="done: {tool_result}"))
    server.add_rule(
        Rule(after_tool="explode", reply_tool_calls=[ToolCallSpec("plus", {"a": 1, "b": 2})])
    )
    server.add_rule(Rule(reply_tool_calls=[ToolCallSpec("explode", {"reason": "test"})]))
    env = AgentsExecutionEnvironment.get_execution_environment()
    assert env.from_list(["go"]).apply(agents.ToolListAgent).to_list() == ["done: 3"]
    first, second, _ = (c.request for c in server.calls)
    assert [t["function"]["name"] for t in first["tools"]] == ["explode", "plus"]
    assert first["tools"][0]["function"]["description"] == "A tool that always fails."
    assert second["messages"][-1]["content"] == "Error: RuntimeError: tool broke: test"


def test_unknown_tools_and_bad_arguments_are_reported_to_the_model(scripted_env):
    server = scripted_env
    server.add_rule(Rule(after_tool="get_weather", reply_text="{tool_result}"))
    server.add_rule(
        Rule(
            reply_tool_calls=[
                ToolCallSpec("teleport", {}),
                ToolCallSpec("get_weather", {"town": "Porto"}),
            ]
        )
    )
    [output] = LocalRunner(agents.WeatherAgent).run("k", "weather?")
    messages = server.calls[1].request["messages"]
    assert messages[2]["content"] == "Error: no such tool"
    assert messages[3]["content"].startswith("Error: ToolArgumentsError: tool 'get_weather'")
    assert "city: Field required" in output["text"]


def test_an_agent_run_fails_clearly_once_the_model_gives_up(scripted_env):
    scripted_env.fail_next(10, status=503)
    with pytest.raises(ActionExecutionError) as caught:
        LocalRunner(agents.WeatherAgent).run("ana", "weather?")
    assert caught.value.action == "chat_model_action"
    assert isinstance(caught.value.cause, ChatModelError)
    assert caught.value.cause.attempts == 3  # SCRIPTED_MODEL allows 2 retries
    assert scripted_env.call_count("chat") == 3
    assert SECRET not in str(caught.value)


def test_built_in_actions_are_bound_but_not_written_into_plans():
    plan = compile_agent(agents.WeatherAgent)
    assert [a.name for a in plan.actions] == ["ask", "answer"]
    assert "chat_model_action" not in plan.to_yaml()
    runner = LocalRunner(plan)
    assert [a.name for a in runner.engine.plan.actions] == [
        "ask",
        "answer",
        "chat_model_action",
        "tool_call_action",
        "context_retrieval_action",
    ]


def test_a_plan_action_of_the_same_name_replaces_a_built_in():
    plan = plan_from_yaml(
        "name: custom\nactions:\n  - name: chat_model_action\n"
        "    function: tests.integrations.chat_agents:WeatherAgent.answer\n"
        "    listen_to: [flink_agents.api._chat:ChatResponseEvent]\n"
    )
    bound = LocalRunner(plan).engine.plan
    assert [(a.name, a.function) for a in bound.actions] == [
        ("chat_model_action", agents.WeatherAgent.answer),
        ("tool_call_action", tool_call_action),
        ("context_retrieval_action", context_retrieval_action),
    ]
