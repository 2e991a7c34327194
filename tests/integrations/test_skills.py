"""Skills end to end with the scripted stand-in: the model first sees only their names and
descriptions, loads one, reads one of its files, then answers; from ``ReActAgent`` and from a
plain action; and a restored run replays the skill tools' answers instead of reading again."""

from __future__ import annotations

import pytest

from flink_agents.agents import ReActAgent
from flink_agents.api import (
    ActionExecutionError,
    FlinkAgentsError,
    ResourceDescriptor,
    ResourceType,
    Skills,
)
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.plan import plan_from_yaml, save_plan
from flink_agents.runtime import LocalRunner
from flink_agents.runtime.action_log import InMemoryActionLog
from flink_agents.runtime.journal import ActionJournal
from flink_agents.testing.llm_server import Rule, ToolCallSpec
from tests.children import run_child_main
from tests.integrations import chat_agents
from tests.integrations.skill_agents import PACKAGE, SkilledAsker, SkillLister

QUESTION = "How many km are 3 miles?"
ANSWER = "3 miles are 4.83 km."
FACTORS = "references/factors.md"


@pytest.fixture
def stand_in(monkeypatch, llm_server):
    """The stand-in, where both kinds of agents of these tests look for it."""
    for variable in ("OPENAI_BASE_URL", "TEST_LLM_URL"):
        monkeypatch.setenv(variable, llm_server.base_url)
    for variable in ("OPENAI_API_KEY", "TEST_LLM_KEY"):
        monkeypatch.setenv(variable, "sk-skills-2468")
    return llm_server


@pytest.fixture
def scripted(stand_in):
    """The stand-in, scripted to load the unit-converter skill, read its factors, answer."""
    llm_server = stand_in
    llm_server.add_rule(Rule(after_tool="read_skill_file", reply_text=ANSWER))
    llm_server.add_rule(
        Rule(
            after_tool="load_skill",
            reply_tool_calls=[
                ToolCallSpec("read_skill_file", {"name": "unit-converter", "path": FACTORS})
            ],
        )
    )
    llm_server.add_rule(
        Rule(
            last_user_contains="miles",
            reply_tool_calls=[ToolCallSpec("load_skill", {"name": "unit-converter"})],
        )
    )
    return llm_server


def react(**options) -> ReActAgent:
    model = OpenAIChatModel("scripted", retry_initial_wait=0.01, max_retries=0)
    return ReActAgent(**{"chat_model": model, "skills": Skills.from_package(PACKAGE), **options})


def assert_disclosed_step_by_step(server) -> None:
    """The three requests: names and descriptions only, then the instructions, then the file."""
    skills = Skills.from_package(PACKAGE)
    factors = skills.read_skill_file("unit-converter", FACTORS)
    first, second, third = (call.request for call in server.calls)
    assert [t["function"]["name"] for t in first["tools"]] == ["load_skill", "read_skill_file"]
    assert {"role": "system", "content": skills.summary()} in first["messages"]
    assert first["messages"][-1] == {"role": "user", "content": QUESTION}
    shown = str(first)
    assert "Converts quantities between units" in shown and "Writes a haiku" in shown
    assert "Converting units" not in shown and "1.609344" not in shown
    instructions = second["messages"][-1]
    assert instructions["role"] == "tool"
    assert instructions["content"] == skills.load_skill("unit-converter")
    assert "# Converting units" in instructions["content"] and FACTORS in instructions["content"]
    assert "1.609344" not in str(second)
    assert third["messages"][-1]["role"] == "tool"
    assert third["messages"][-1]["content"] == factors
    assert "| mile | km | 1.609344 |" in factors


def test_react_agent_offers_skills_a_little_at_a_time(scripted):
    assert LocalRunner(react()).run("k", QUESTION) == [ANSWER]
    assert_disclosed_step_by_step(scripted)
    first = scripted.calls[0].request
    assert [m["role"] for m in first["messages"]] == ["system", "system", "user"]


def test_react_agent_keeps_its_own_tools_beside_the_skills(scripted):
    agent = react(tools=[chat_agents.add])
    assert LocalRunner(agent).run("k", QUESTION) == [ANSWER]
    first = scripted.calls[0].request
    names = [t["function"]["name"] for t in first["tools"]]
    assert names == ["add", "load_skill", "read_skill_file"]


def test_react_agent_skills_from_a_folder_go_through_a_plan_file(scripted, tmp_path):
    from tests.integrations import skill_pack

    folder = f"{skill_pack.__path__[0]}/skills"
    plan = react(skills=Skills.from_local_dir(folder)).to_plan()
    [declared] = [r for r in plan.resources if r.name == "skills"]
    assert (declared.type, declared.provider) == (ResourceType.SKILLS, "flink_agents.api:Skills")
    assert declared.args == {"dirs": [folder]}
    assert plan.config["react"]["skills"] == "skills"
    path = tmp_path / "plan.yaml"
    save_plan(plan, path)
    assert LocalRunner(plan_from_yaml(path.read_text())).run("k", QUESTION) == [ANSWER]
    assert_disclosed_step_by_step(scripted)


def test_a_plan_without_a_tool_list_offers_the_models_tools_and_the_skills(scripted):
    plan = react().to_plan()
    data = plan.model_dump(mode="json")
    del data["config"]["react"]["tools"]  # as a plan file may: the model's own tools
    [model] = [r for r in data["resources"] if r["name"] == "chat_model"]
    model["args"]["tools"] = ["add"]
    data["resources"].append(
        {
            "name": "add",
            "type": "tool",
            "provider": "flink_agents.api:Tool.from_ref",
            "args": {"function": "tests.integrations.chat_agents:add"},
        }
    )
    assert LocalRunner(type(plan).model_validate(data)).run("k", QUESTION) == [ANSWER]
    names = [t["function"]["name"] for t in scripted.calls[0].request["tools"]]
    assert names == ["add", "load_skill", "read_skill_file"]


def test_react_agent_takes_a_descriptor_and_refuses_other_things(scripted):
    descriptor = ResourceDescriptor(Skills, ResourceType.SKILLS, packages=[list(PACKAGE)])
    assert LocalRunner(react(skills=descriptor)).run("k", QUESTION) == [ANSWER]
    with pytest.raises(TypeError, match="skills must be Skills or a ResourceDescriptor"):
        react(skills=["unit-converter"])


def test_a_tool_named_like_the_skills_resource_is_refused(scripted):
    from flink_agents.api import Tool

    clash = {"skills": Tool.from_function(chat_agents.add)}
    with pytest.raises(FlinkAgentsError, match="a tool or prompt is named 'skills'"):
        react(tools=clash).to_plan()


def test_a_plain_action_offers_skills_through_a_chat_request(scripted):
    assert LocalRunner(SkilledAsker).run("k", QUESTION) == [ANSWER]
    assert_disclosed_step_by_step(scripted)
    first = scripted.calls[0].request
    assert [m["role"] for m in first["messages"]] == ["system", "user"]


def test_an_action_can_list_the_skills_without_a_model():
    assert LocalRunner(SkillLister).run("k", "list") == [
        {"haiku-writer": "Writes a haiku (thre", "unit-converter": "Converts quantities "}
    ]


@pytest.mark.parametrize(
    ("call", "told"),
    [
        (
            ToolCallSpec("load_skill", {"name": "poems"}),
            "SkillError: no skill is named 'poems' (skills: haiku-writer, unit-converter)",
        ),
        (
            ToolCallSpec("read_skill_file", {"name": "unit-converter", "path": "../../x.py"}),
            "SkillError: skill 'unit-converter' (tests.integrations.skill_pack:skills/"
            "unit-converter): file '../../x.py' climbs out of the skill folder ('..')",
        ),
    ],
)
def test_a_skill_call_the_model_gets_wrong_is_an_error_it_is_told(stand_in, call, told):
    stand_in.add_rule(Rule(after_tool=call.name, reply_text="told: {tool_result}"))
    stand_in.add_rule(Rule(reply_tool_calls=[call]))
    assert LocalRunner(react()).run("k", "a poem please") == [f"told: Error: {told}"]


# --- durable calls --------------------------------------------------------------------------


def test_a_restored_run_replays_the_skill_tools_instead_of_calling_them(scripted, monkeypatch):
    """The model's last call fails the run after both skill tools answered; the restored
    run gets their recorded answers (neither tool is called again) and asks the model only
    the call that failed."""
    reads: list[tuple[str, ...]] = []
    load_skill, read_skill_file = Skills.load_skill, Skills.read_skill_file

    def counted_load(self, name):
        reads.append(("load_skill", name))
        return load_skill(self, name)

    def counted_read(self, name, path):
        reads.append(("read_skill_file", name, path))
        if len(reads) == 2:  # the first run: the model's next call fails
            scripted.fail_next(1, status=500)
        return read_skill_file(self, name, path)

    monkeypatch.setattr(Skills, "load_skill", counted_load)
    monkeypatch.setattr(Skills, "read_skill_file", counted_read)
    log = InMemoryActionLog()
    first = LocalRunner(react(), journal=ActionJournal(log, "job"))
    checkpoint = first.snapshot()  # before the record: Flink reads it again after a restore
    with pytest.raises(ActionExecutionError):
        first.run("k", QUESTION)
    assert reads == [
        ("load_skill", "unit-converter"),
        ("read_skill_file", "unit-converter", FACTORS),
    ]
    assert [call.status for call in scripted.calls] == [200, 200, 500]

    second = LocalRunner(react(), journal=ActionJournal(log, "job"))
    second.restore(checkpoint)
    assert second.run("k", QUESTION) == [ANSWER]
    assert len(reads) == 2  # no skill tool was called again
    assert [call.status for call in scripted.calls] == [200, 200, 500, 200]
    last = scripted.calls[-1].request
    assert last["messages"][-1]["content"] == Skills.from_package(PACKAGE).read_skill_file(
        "unit-converter", FACTORS
    )


# --- on Flink -------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.flink
def test_react_agent_with_skills_on_minicluster(scripted):
    """Thread mode, in a child process (a TaskManager of its own): each worker loads the
    packaged skills again from the plan's descriptor, and the model is offered them as on
    the local runner."""
    assert run_child_main("tests.integrations.skills_minicluster") == [ANSWER, ANSWER]
    requests = [call.request for call in scripted.calls]
    assert len(requests) == 6
    firsts = [r for r in requests if r["messages"][-1]["role"] == "user"]
    summary = Skills.from_package(PACKAGE).summary()
    assert all({"role": "system", "content": summary} in r["messages"] for r in firsts)
    assert len(firsts) == 2 and "Converting units" not in str(firsts)
    read = [r for r in requests if r["messages"][-1].get("content", "").startswith("# Factors")]
    assert len(read) == 2
