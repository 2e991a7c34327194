"""Apache Flink Agents' API surface over ours: decorators, descriptors and their resource
names, secrets, unsupported providers, configuration, prompts and tools."""

import pytest

from flink_agents.api import PlanError
from flink_agents.api.agents.agent import Agent
from flink_agents.api.configuration import Configuration
from flink_agents.api.core_options import AgentExecutionOptions, ErrorHandlingStrategy
from flink_agents.api.decorators import action, chat_model_setup, tool
from flink_agents.api.events.event import InputEvent
from flink_agents.api.execution_environment import AgentsExecutionEnvironment
from flink_agents.api.prompts.prompt import Prompt
from flink_agents.api.resource import ResourceDescriptor, ResourceName, ResourceType
from flink_agents.api.tools.tool import Tool, ToolMetadata
from flink_agents.api.tools.utils import create_schema_from_function
from flink_agents.migration import runner_options
from tests.migration import surface_agents as agents

SECRET = "sk-migration-surface-7731"


def test_decorators_leave_their_markers():
    @action(InputEvent, "Custom")
    def act(event, ctx):
        pass

    @tool
    def look(q: str) -> str:
        return q

    @chat_model_setup
    def setup():
        pass

    assert act._listen_events == (InputEvent, "Custom")
    assert look._is_tool and setup._is_chat_model_setup
    with pytest.raises(AssertionError):
        action()
    with pytest.raises(AssertionError):
        action(int)


def test_a_descriptor_names_its_class_and_compares_by_content():
    one = ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_SETUP, model="m", connection="c")
    two = ResourceDescriptor(
        target_module="flink_agents.integrations.chat_models.ollama_chat_model",
        target_clazz="OllamaChatModelSetup",
        arguments={"model": "m"},
        connection="c",
    )
    assert one == two and hash(one) == hash(two)
    assert one.arguments == {"model": "m", "connection": "c"}
    assert one.type is ResourceType.CHAT_MODEL
    with pytest.raises(ValueError, match="fully qualified name"):
        ResourceDescriptor(model="m")


def test_a_secret_given_by_value_goes_into_the_plan_as_an_environment_reference(monkeypatch):
    monkeypatch.setenv("SURFACE_OPENAI_KEY", SECRET)
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.add_resource(
        "openai",
        ResourceType.CHAT_MODEL_CONNECTION,
        ResourceDescriptor(clazz=ResourceName.ChatModel.OPENAI_CONNECTION, api_key=SECRET),
    )
    agent = agents.Empty().add_action("echo", [InputEvent], agents.echo)
    builder = env.from_list([{"key": 1, "value": "x"}]).apply(agent)
    plan = builder.inner.runner.plan
    assert SECRET not in plan.model_dump_json()
    (openai,) = [r for r in plan.resources if r.name == "openai"]
    assert openai.args["api_key"] == {"env": "SURFACE_OPENAI_KEY"}

    env = AgentsExecutionEnvironment.get_execution_environment()
    env.add_resource(
        "openai",
        ResourceType.CHAT_MODEL_CONNECTION,
        ResourceDescriptor(clazz=ResourceName.ChatModel.OPENAI_CONNECTION, api_key="sk-nowhere"),
    )
    with pytest.raises(PlanError, match="would write a secret into the plan") as caught:
        env.from_list([]).apply(agents.Empty().add_action("echo", [InputEvent], agents.echo))
    assert "sk-nowhere" not in str(caught.value)


def test_providers_we_do_not_carry_fail_when_the_plan_is_built_naming_what_to_use():
    env = AgentsExecutionEnvironment.get_execution_environment()
    with pytest.raises(PlanError, match="Anthropic's own API is not supported here: use "):
        env.from_list([]).apply(agents.Anthropic())
    with pytest.raises(PlanError, match="Java resource"):
        AgentsExecutionEnvironment.get_execution_environment().from_list([]).apply(
            agents.UsesJava()
        )
    java = ResourceDescriptor(clazz=ResourceName.ChatModel.Java.OLLAMA_SETUP, model="m")
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.add_resource("m", ResourceType.CHAT_MODEL, java)
    with pytest.raises(PlanError, match="is a Java resource"):
        env.from_list([]).apply(agents.Empty().add_action("echo", [InputEvent], agents.echo))


def test_what_their_local_environment_refuses_is_a_runtime_error():
    env = AgentsExecutionEnvironment.get_execution_environment()
    builder = env.from_list([{"key": 1, "value": "a"}])
    with pytest.raises(RuntimeError, match="already has its input"):
        env.from_list([])
    agent = agents.Empty().add_action("echo", [InputEvent], agents.echo)
    outputs = builder.apply(agent).to_list()
    with pytest.raises(RuntimeError, match="already applied"):
        builder.apply(agent)
    env.execute()
    with pytest.raises(RuntimeError, match="already executed"):
        env.execute()
    assert outputs == [{1: ("a", None)}]


def test_records_added_to_the_input_before_execute_count():
    env = AgentsExecutionEnvironment.get_execution_environment()
    records = [{"key": "a", "value": 1}]
    agent = agents.Empty().add_action("echo", [InputEvent], agents.echo)
    outputs = env.from_list(records).apply(agent).to_list()
    records.append({"key": "b", "value": 2})
    env.execute()
    assert outputs == [{"a": (1, None)}, {"b": (2, None)}]


def test_an_agent_built_in_code_with_action_config():
    agent = Agent().add_action("echo", [InputEvent], agents.echo, suffix="!")
    with pytest.raises(ValueError, match="already defined"):
        agent.add_action("echo", [InputEvent], agents.echo)
    env = AgentsExecutionEnvironment.get_execution_environment()
    outputs = env.from_list([{"key": "a", "value": 1}, {"value": 2}]).apply(agent).to_list()
    env.execute()
    assert outputs[0] == {"a": (1, "!")}
    ((_, value),) = outputs[1].items()
    assert value == (2, "!")  # a record without a key runs under a key of its own
    with pytest.raises(PlanError, match="has no actions"):
        AgentsExecutionEnvironment.get_execution_environment().from_list([]).apply(Agent())


def test_their_options_configure_the_runner():
    config = Configuration()
    config.set(AgentExecutionOptions.ERROR_HANDLING_STRATEGY, ErrorHandlingStrategy.IGNORE)
    config.set(AgentExecutionOptions.MAX_RETRIES, 2)
    config.set(AgentExecutionOptions.CHAT_ASYNC, False)
    config.set_str("greeting", "hi")
    config.set("num-async-threads", 8)
    config.set_str("baseLogDir", "/tmp/logs")
    assert runner_options(config) == (
        {
            "error-policy": "error-output",
            "retry-max-attempts": 3,
            "num-async-threads": 8,
            "event-log-dir": "/tmp/logs",
            "event-log-level": "standard",
        },
        {"greeting": "hi"},
    )
    assert config.get(AgentExecutionOptions.MAX_RETRIES) == 2
    assert config.get(AgentExecutionOptions.ERROR_HANDLING_STRATEGY) is ErrorHandlingStrategy.IGNORE
    assert config.get_bool("missing", True) is True
    config.set_str("flag", "true")
    assert config.get_bool("flag") is True


def test_ignore_sends_a_failing_run_to_the_error_output():
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.get_config().set(
        AgentExecutionOptions.ERROR_HANDLING_STRATEGY, ErrorHandlingStrategy.IGNORE
    )
    agent = agents.Empty().add_action("fail", [InputEvent], agents.fail)
    builder = env.from_list([{"key": "k", "value": "way"}]).apply(agent)
    outputs = builder.to_list()
    env.execute()
    assert outputs == []
    (error,) = builder.inner.error_stream()
    assert error["kind"] == "failed_run" and "no way" in str(error)


def test_their_prompt_fills_leniently():
    prompt = Prompt.from_text("Hello {name}, {{literal}} and {missing}")
    assert prompt.format_string(name="Ann") == "Hello Ann, {{literal}} and {missing}"
    (message,) = prompt.format_messages(name="Ann")
    assert message.role.value == "system"


def test_tools_and_their_metadata():
    def lookup(city: str, days: int = 1) -> str:
        """Look up the weather.

        Args:
            city: where.
            days: how many days.
        """
        return city

    function_tool = Tool.from_callable(lookup)
    assert function_tool.metadata.name == "lookup"
    schema = create_schema_from_function("lookup", lookup)
    metadata = ToolMetadata(name="lookup", description="Look up the weather.", args_schema=schema)
    assert metadata.get_parameters_dict()["required"] == ["city"]
    spec = metadata.to_spec().parameters
    assert spec["properties"] == function_tool.metadata.parameters["properties"]
    unknown = ResourceDescriptor(clazz="no.such.module.Thing")
    with pytest.raises(ImportError):
        unknown.clazz  # noqa: B018
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.add_resource("thing", ResourceType.CUSTOM, unknown)
    with pytest.raises(
        PlanError, match=r"resource class 'no\.such\.module\.Thing' cannot be imported"
    ):
        env.from_list([]).apply(agents.Empty().add_action("echo", [InputEvent], agents.echo))


def test_a_chat_model_of_the_users_own_written_their_way():
    from tests.migration import custom_agents

    env = AgentsExecutionEnvironment.get_execution_environment()
    outputs = (
        env.from_list([{"key": "k", "value": "sum 1 and 2"}])
        .apply(custom_agents.CustomModelAgent())
        .to_list()
    )
    env.execute()
    assert outputs == [{"k": custom_agents.Sum(total=3)}]
    first, second = custom_agents.CALLS
    assert first == ["Use the tools for: sum 1 and 2"]
    assert second[-1] == "3"


def test_long_term_memory_as_their_agents_use_it(tmp_path):
    env = AgentsExecutionEnvironment.get_execution_environment(data_dir=str(tmp_path))
    outputs = (
        env.from_list([{"key": "k", "value": ["an apple", "a hammer"]}])
        .apply(agents.Notes())
        .to_list()
    )
    env.execute()
    assert outputs == [{"k": (2, ["an apple"])}]


def test_their_docstrings_describe_their_tools_and_a_missing_resource_is_a_key_error():
    from tests.migration import custom_agents

    spec = Tool.from_callable(custom_agents.CustomModelAgent.add).metadata
    assert spec.description == "Add two numbers."
    assert spec.parameters["properties"]["a"]["description"] == "The first."
    env = AgentsExecutionEnvironment.get_execution_environment()
    agent = agents.Empty().add_action("look", [InputEvent], agents.look_up_missing)
    outputs = env.from_list([{"key": "k", "value": 1}]).apply(agent).to_list()
    env.execute()
    assert outputs == [{"k": "no resource"}]


def test_a_secret_inside_a_header_is_written_as_a_reference(monkeypatch):
    monkeypatch.setenv("SURFACE_TOKEN", SECRET)
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.add_resource(
        "openai",
        ResourceType.CHAT_MODEL_CONNECTION,
        ResourceDescriptor(
            clazz=ResourceName.ChatModel.OPENAI_CONNECTION,
            default_headers={"Authorization": f"Bearer {SECRET}"},
        ),
    )
    agent = agents.Empty().add_action("echo", [InputEvent], agents.echo)
    plan = env.from_list([]).apply(agent).inner.runner.plan
    assert SECRET not in plan.model_dump_json()
    (openai,) = [r for r in plan.resources if r.name == "openai"]
    assert openai.args["default_headers"] == {"Authorization": "Bearer ${env:SURFACE_TOKEN}"}


def test_our_resource_decorator_survives_their_module_of_the_same_name():
    import flink_agents.api.resource  # noqa: F401 (sets the package's attribute `resource`)
    from flink_agents.api import ResourceType, resource

    @resource(ResourceType.CUSTOM, word="hi")
    def provider(word):
        return word

    assert provider("x") == "x"
    assert provider.__flink_agents_resource__[0] is ResourceType.CUSTOM


def test_a_hyphenated_secret_header_and_a_name_of_two_types(monkeypatch):
    monkeypatch.setenv("SURFACE_KEY", SECRET)
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.add_resource(
        "openai",
        ResourceType.CHAT_MODEL_CONNECTION,
        ResourceDescriptor(
            clazz=ResourceName.ChatModel.OPENAI_CONNECTION, default_headers={"X-API-Key": SECRET}
        ),
    )
    agent = agents.Empty().add_action("echo", [InputEvent], agents.echo)
    plan = env.from_list([]).apply(agent).inner.runner.plan
    assert SECRET not in plan.model_dump_json()

    agent = agents.Empty().add_action("echo", [InputEvent], agents.echo)
    agent.add_resource("p", ResourceType.PROMPT, Prompt.from_text("hi"))
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.add_resource("p", ResourceType.TOOL, Tool.from_callable(agents.echo))
    with pytest.raises(PlanError, match="declared as a prompt and added as a tool"):
        env.from_list([]).apply(agent)


def test_a_reply_read_their_way():
    from flink_agents.api import ChatMessage, ChatResponse
    from flink_agents.api.agents.react_agent import OutputSchema

    reply = ChatResponse(message=ChatMessage(role="assistant", content="hi"))
    assert reply.content == "hi"  # theirs answers the message itself
    assert OutputSchema(output_schema=dict).output_schema is dict
