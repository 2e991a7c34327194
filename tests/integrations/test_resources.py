"""Resources declared in YAML: created lazily and once, secrets resolved only at creation."""

import logging

import pytest

from flink_agents.api import (
    ActionExecutionError,
    FlinkAgentsError,
    ResourceType,
    UnknownResourceError,
)
from flink_agents.plan import plan_from_yaml
from flink_agents.runtime import LocalRunner
from flink_agents.runtime._resources import resolve_env
from tests.integrations import chat_agents as agents

SECRET = "s3cret-token-0451"

PLAN = """
name: resourceful
actions:
  - name: use
    function: tests.integrations.test_resources:use_resource
    listen_to: [InputEvent]
resources:
  - name: store
    type: custom
    provider: tests.integrations.chat_agents:CountingResource
    args:
      token: {env: RESOURCE_TEST_TOKEN}
      header: "Bearer ${env:RESOURCE_TEST_TOKEN}"
      nested: {hosts: ["${env:RESOURCE_TEST_HOST}:9000"], plain: 3}
  - name: refusing
    type: custom
    provider: tests.integrations.chat_agents:failing_provider
    args: {token: {env: RESOURCE_TEST_TOKEN}}
"""


def use_resource(event, ctx) -> None:
    """Fetches the resource the input names and emits it."""
    from flink_agents.api import OutputEvent

    name = event.input["resource"]
    ctx.send_event(OutputEvent(output=ctx.get_resource(name, ResourceType.CUSTOM)))


@pytest.fixture
def created():
    agents.CREATED.clear()
    yield agents.CREATED
    agents.CREATED.clear()


@pytest.fixture
def secret_env(monkeypatch):
    monkeypatch.setenv("RESOURCE_TEST_TOKEN", SECRET)
    monkeypatch.setenv("RESOURCE_TEST_HOST", "db.internal")


def test_yaml_resource_is_created_lazily_once_with_resolved_env(secret_env, created):
    plan = plan_from_yaml(PLAN)
    assert SECRET not in plan.to_json() and SECRET not in plan.to_yaml()
    runner = LocalRunner(plan)
    assert created == []  # nothing is created before an action asks
    found = [runner.run(key, {"resource": "store"})[0] for key in ("a", "b", "a")]
    assert found[0] is found[1] is found[2]
    assert created == [
        {
            "token": SECRET,
            "header": f"Bearer {SECRET}",
            "nested": {"hosts": ["db.internal:9000"], "plain": 3},
        }
    ]
    assert plan.resources[0].args["token"] == {"env": "RESOURCE_TEST_TOKEN"}  # plan unchanged


def test_unset_variable_names_the_resource_and_the_variable(monkeypatch, created):
    monkeypatch.delenv("RESOURCE_TEST_TOKEN", raising=False)
    with pytest.raises(ActionExecutionError) as caught:
        LocalRunner(plan_from_yaml(PLAN)).run("k", {"resource": "store"})
    assert str(caught.value.cause) == (
        "resource 'store': environment variable RESOURCE_TEST_TOKEN is not set "
        "(it is referenced by args.token)"
    )
    assert created == []


def test_a_provider_echoing_a_secret_is_masked(secret_env, caplog):
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ActionExecutionError) as caught:
        LocalRunner(plan_from_yaml(PLAN)).run("k", {"resource": "refusing"})
    message = str(caught.value)
    assert "the service refused token ***" in message
    assert SECRET not in message and SECRET not in caplog.text
    assert caught.value.cause.__cause__ is None  # the original error, holding it, is dropped


def test_resolve_env_leaves_plain_values_alone():
    secrets: list[str] = []
    value = {"a": [1, "x", {"env": "NOT_A_REF", "other": 1}], "b": "$notenv"}
    assert resolve_env("r", value, {}, secrets) == value
    assert secrets == []
    assert resolve_env("r", "${env:K}/${env:K}", {"K": "abcd"}, secrets) == "abcd/abcd"


def test_unknown_resource_is_a_lookup_error(secret_env):
    runner = LocalRunner(plan_from_yaml(PLAN))
    with pytest.raises(UnknownResourceError) as caught:
        runner.engine.resources.get("nope")
    assert isinstance(caught.value, (FlinkAgentsError, LookupError))
    assert "declared: refusing, store" in str(caught.value)


def test_python_declared_secrets_stay_out_of_the_plan_and_the_logs(monkeypatch, llm_server, caplog):
    """A model declared with ``@resource`` keeps its key as a reference in the compiled plan,
    and a whole run (resource creation, model and tool calls) logs nothing of it."""
    from flink_agents.plan import compile_agent, plan_from_json
    from flink_agents.testing.llm_server import Rule, ToolCallSpec

    caplog.set_level(logging.DEBUG)  # every logger: ours, openai's, httpx's
    monkeypatch.setenv("TEST_LLM_URL", llm_server.base_url)
    monkeypatch.setenv("TEST_LLM_KEY", SECRET)
    llm_server.add_rule(Rule(after_tool="get_weather", reply_text="It is {tool_result}."))
    llm_server.add_rule(Rule(reply_tool_calls=[ToolCallSpec("get_weather", {"city": "Oslo"})]))
    plan = compile_agent(agents.WeatherAgent)
    [model] = [r for r in plan.resources if r.name == "llm"]
    assert model.args["api_key"] == {"env": "TEST_LLM_KEY"}
    shipped = plan.to_json()
    assert SECRET not in shipped and SECRET not in plan.to_yaml()
    [output] = LocalRunner(plan_from_json(shipped)).run("k", "weather in Oslo?")
    assert output["text"] == "It is sunny in Oslo."
    assert llm_server.call_count("chat") == 2
    assert "POST" in caplog.text  # the HTTP calls were logged...
    assert SECRET not in caplog.text  # ...without the key
