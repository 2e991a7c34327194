"""ReActAgent: the tool loop to a structured answer, its step limit, and its plans."""

import json
import logging
from pathlib import Path

import pytest

from flink_agents.agents import ReActAgent
from flink_agents.api import (
    ActionExecutionError,
    AgentsExecutionEnvironment,
    FlinkAgentsError,
    MaxStepsExceededError,
    Prompt,
    Tool,
)
from flink_agents.cli import main as cli_main
from flink_agents.examples.react_tools import Calculation as YamlCalculation
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.plan import compile_agent, load_plan, plan_from_json, plan_from_yaml, save_plan
from flink_agents.runtime import LocalRunner
from flink_agents.testing.llm_server import Rule, ToolCallSpec
from tests.integrations import chat_agents as agents

REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-react-secret-9876"


@pytest.fixture
def openai_env(monkeypatch, llm_server):
    """Point the default OpenAI settings at the scripted server."""
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    return llm_server


def calculator(**options) -> ReActAgent:
    model = OpenAIChatModel("scripted", retry_initial_wait=0.01, max_retries=1)
    settings = dict(chat_model=model, tools=[agents.add, agents.multiply])
    return ReActAgent(**{**settings, **options})


def run(agent, records) -> list:
    env = AgentsExecutionEnvironment.get_execution_environment()
    return env.from_list(records).apply(agent).to_list()


def two_tool_script(server) -> None:
    """(2 + 3) * 4: add, then multiply, then a structured answer."""
    server.add_rule(
        Rule(after_tool="multiply", reply_json={"result": 20, "explanation": "(2+3)*4"})
    )
    server.add_rule(
        Rule(after_tool="add", reply_tool_calls=[ToolCallSpec("multiply", {"a": 5, "b": 4})])
    )
    server.add_rule(
        Rule(last_user_contains="2 + 3", reply_tool_calls=[ToolCallSpec("add", {"a": 2, "b": 3})])
    )


def test_two_tools_then_a_structured_answer(openai_env):
    two_tool_script(openai_env)
    agent = calculator(output_schema=agents.Calculation)
    assert run(agent, ["What is (2 + 3) * 4?"]) == [
        agents.Calculation(result=20, explanation="(2+3)*4")
    ]
    requests = [c.request for c in openai_env.calls]
    assert len(requests) == 3
    assert [t["function"]["name"] for t in requests[0]["tools"]] == ["add", "multiply"]
    assert requests[0]["messages"][0]["role"] == "system"
    assert requests[0]["response_format"]["json_schema"]["name"] == "Calculation"
    assert requests[1]["messages"][-1]["content"] == "5"  # add's result
    assert requests[2]["messages"][-1]["content"] == "20"  # multiply's result
    assert [m["role"] for m in requests[2]["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]


def test_without_a_schema_the_output_is_the_answer_text(openai_env):
    openai_env.add_rule(Rule(reply_text="The answer is 4."))
    assert run(calculator(), ["2 + 2?"]) == ["The answer is 4."]


def test_prompt_variables_come_from_the_input(openai_env):
    openai_env.add_rule(Rule(system_contains="in Portuguese", reply_text="quatro"))
    prompt = Prompt.from_messages(
        [
            {"role": "system", "content": "Answer in {language}."},
            {"role": "user", "content": "{question}"},
        ]
    )
    outputs = run(calculator(prompt=prompt), [{"language": "Portuguese", "question": "2+2?"}])
    assert outputs == ["quatro"]
    assert openai_env.calls[0].request["messages"] == [
        {"role": "system", "content": "Answer in Portuguese."},
        {"role": "user", "content": "2+2?"},
    ]


def test_a_text_prompt_without_a_user_message_gets_the_input_appended(openai_env):
    openai_env.add_rule(Rule(reply_text="ok"))
    prompt = Prompt.from_messages([{"role": "system", "content": "Be brief."}])
    run(calculator(prompt=prompt), [{"q": 1}])
    assert openai_env.calls[0].request["messages"][-1] == {"role": "user", "content": '{"q": 1}'}


def test_step_limit_fails_the_run_with_a_clear_error(openai_env):
    openai_env.add_rule(Rule(reply_tool_calls=[ToolCallSpec("add", {"a": 1, "b": 1})]))
    with pytest.raises(ActionExecutionError) as caught:
        run(calculator(max_steps=3), ["loop forever"])
    cause = caught.value.cause
    assert isinstance(cause, MaxStepsExceededError)
    assert "made 3 model calls (max_steps=3) without a final answer" in str(cause)
    assert "still asks for tools: add" in str(cause)
    assert openai_env.call_count("chat") == 3


def test_each_input_gets_its_own_loop_and_memory_is_cleared(openai_env):
    openai_env.add_rule(Rule(reply_text="echo: {last_user}"))
    runner = LocalRunner(calculator())
    assert runner.run("a", "one") == ["echo: one"]
    assert runner.run("a", "two") == ["echo: two"]
    assert runner.sensory_memory("a") == {} and runner.short_term_memory("a") == {}


# --- plans --------------------------------------------------------------------------------


def test_to_plan_round_trips_and_holds_no_secret(openai_env, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    two_tool_script(openai_env)
    agent = calculator(output_schema=agents.Calculation, prompt="Solve: {input}", max_steps=5)
    plan = agent.to_plan()
    assert plan.config == {
        "react": {
            "chat_model": "chat_model",
            "tools": ["add", "multiply"],
            "max_steps": 5,
            "prompt": "prompt",
            "output_schema": "tests.integrations.chat_agents:Calculation",
        }
    }
    assert [r.name for r in plan.resources] == ["chat_model", "add", "multiply", "prompt"]
    assert plan_from_json(plan.to_json()) == plan and plan_from_yaml(plan.to_yaml()) == plan
    saved = [save_plan(plan, tmp_path / name) for name in ("react.yaml", "react.json")]
    for path in saved:
        assert SECRET not in path.read_text()
    # The saved plan runs like the agent, reading the key from the environment.
    [answer] = run(saved[0], ["What is (2 + 3) * 4?"])
    assert answer == agents.Calculation(result=20, explanation="(2+3)*4")
    assert openai_env.calls[0].request["messages"][-1]["content"] == "Solve: What is (2 + 3) * 4?"
    assert SECRET not in caplog.text


def test_a_key_given_in_code_is_refused_by_to_plan(llm_server):
    model = OpenAIChatModel("m", base_url=llm_server.base_url, api_key=SECRET)
    with pytest.raises(FlinkAgentsError) as caught:
        ReActAgent(chat_model=model).to_plan()
    assert "api_key given in code cannot be written into an agent plan" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_parts_defined_inside_functions_cannot_go_into_a_plan(openai_env):
    def local_tool(x: int) -> int:
        return x

    with pytest.raises(FlinkAgentsError, match="defined inside a function"):
        calculator(tools=[local_tool]).to_plan()
    with pytest.raises(FlinkAgentsError, match="two tools are named 'add'"):
        calculator(tools=[agents.add, Tool.from_function(agents.add)]).to_plan()


def test_the_class_alone_compiles_but_asks_for_its_configuration():
    plan = compile_agent(ReActAgent)
    assert [a.name for a in plan.actions] == ["start", "finish"]
    with pytest.raises(ActionExecutionError, match="ReActAgent is not configured"):
        LocalRunner(plan).run("k", "hi")


def calculator_script(server) -> None:
    """The scripted answers ``plans/react_example.yaml`` gets for "(2 + 3) * 4"."""
    server.add_rule(
        Rule(after_tool="multiply", reply_json={"result": 20.0, "steps": ["2+3=5", "5*4=20"]})
    )
    server.add_rule(
        Rule(after_tool="add", reply_tool_calls=[ToolCallSpec("multiply", {"a": 5, "b": 4})])
    )
    server.add_rule(
        Rule(
            system_contains="careful calculator",
            reply_tool_calls=[ToolCallSpec("add", {"a": 2, "b": 3})],
        )
    )


def test_react_example_plan_file_runs_against_the_scripted_server(openai_env):
    calculator_script(openai_env)
    plan = load_plan(REPO / "plans" / "react_example.yaml")
    assert SECRET not in plan.to_json()
    outputs = run(plan, [{"question": "What is (2 + 3) * 4?"}])
    assert outputs == [YamlCalculation(result=20.0, steps=["2+3=5", "5*4=20"])]
    first = openai_env.calls[0].request
    assert first["model"] == "gpt-4o-mini"
    assert first["messages"][1] == {"role": "user", "content": "What is (2 + 3) * 4?"}
    assert [t["function"]["name"] for t in first["tools"]] == ["add", "multiply"]
    assert first["tools"][1]["function"]["description"] == "Multiply two numbers."


def test_react_example_plan_runs_from_the_command_line(openai_env, tmp_path):
    """``flink-agents run`` (the local runner) writes the structured answers as JSON."""
    calculator_script(openai_env)
    data = tmp_path / "questions.jsonl"
    data.write_text(
        '{"user": "ana", "question": "What is (2 + 3) * 4?"}\n'
        '{"user": "bo", "question": "And (2 + 3) * 4 again?"}\n'
    )
    out, errors = tmp_path / "answers.jsonl", tmp_path / "errors.jsonl"
    plan = str(REPO / "plans" / "react_example.yaml")
    arguments = [plan, str(data), "--key", "user", "--output", str(out), "--errors", str(errors)]
    assert cli_main(["run", *arguments]) == 0
    answers = [json.loads(line) for line in out.read_text().splitlines()]
    assert answers == [{"result": 20.0, "steps": ["2+3=5", "5*4=20"]}] * 2
    assert errors.read_text() == ""
    assert openai_env.call_count("chat") == 6  # add, multiply, answer: per question
