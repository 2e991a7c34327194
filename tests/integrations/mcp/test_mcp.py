"""MCP servers as resources: a real calendar server (``calendar_server.py``, written with the
official SDK) over stdio and over streamable HTTP, driven by a ReAct agent and by the built-in
chat and tool actions through the scripted model."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flink_agents.agents import ReActAgent
from flink_agents.api import (
    AgentsExecutionEnvironment,
    FlinkAgentsError,
    ResourceType,
    ToolUnavailableError,
    UnknownResourceError,
    env_ref,
)
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.integrations.mcp import (
    MCPPrompt,
    MCPServer,
    MCPServerError,
    MCPTool,
    MCPToolError,
)
from flink_agents.plan import bind_plan, load_plan, plan_from_json, plan_from_yaml
from flink_agents.runtime import ActionJournal, LocalRunner, load_options
from flink_agents.runtime._resources import ResourceCache
from flink_agents.runtime.action_log import InMemoryActionLog
from flink_agents.testing import clean_environment
from flink_agents.testing.llm_server import Rule, ToolCallSpec
from tests.integrations.mcp import agents
from tests.integrations.mcp.conftest import LLM_KEY, TOKEN, bookings

REPO = Path(__file__).resolve().parents[3]
REQUEST = {"user": "ana", "day": "Friday", "request": "Book the standup."}
ERROR_OUTPUT = load_options({"error_policy": "error-output"})


def stdio_calendar(**options) -> MCPServer:
    return MCPServer(**{**agents.STDIO, "name": "calendar", **options})


def model() -> OpenAIChatModel:
    return OpenAIChatModel("scripted", retry_initial_wait=0.01, max_retries=1)


def react(server: MCPServer, **options) -> ReActAgent:
    settings = dict(chat_model=model(), tools=[server], prompt=server.prompt("plan_day"))
    return ReActAgent(**{**settings, **options})


def booking_script(server, title: str = "standup") -> None:
    """Book ``title`` on Friday when the server's prompt asks for it, then answer."""
    server.add_rule(Rule(after_tool="book_meeting", reply_text="Done. {tool_result}"))
    server.add_rule(
        Rule(
            last_user_contains="The user asks: Book the",
            reply_tool_calls=[ToolCallSpec("book_meeting", {"title": title, "day": "Friday"})],
        )
    )


def run(agent, records, **options):
    env = AgentsExecutionEnvironment.get_execution_environment(**options)
    builder = env.from_list(records, "user").apply(agent)
    return builder.to_list(), builder.error_stream()


def calendar_children() -> list[int]:
    """Child processes running the calendar server over stdio, in order."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and b"calendar_server.py" in command and b"--http" not in command:
            found.append(int(entry.name))
    return sorted(found)


# --- tools and prompts, over stdio and HTTP -----------------------------------------------


def test_react_agent_calls_an_mcp_tool_and_uses_an_mcp_prompt_over_stdio(scripted, ledger):
    booking_script(scripted)
    running = calendar_children()
    outputs, errors = run(react(stdio_calendar()), [REQUEST])
    assert outputs == ["Done. Booked 'standup' on Friday."] and errors == []
    assert bookings(ledger) == ["standup|Friday"]  # the server really booked it, once
    first, second = (call.request for call in scripted.calls)
    # The prompt is the server's, filled in by the server with the record's fields.
    assert first["messages"] == [
        {
            "role": "user",
            "content": "You plan a calm Friday for the user with the calendar's tools. "
            "The user asks: Book the standup.",
        }
    ]
    # The tools are the server's, on the wire as our own tools are.
    tools = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert sorted(tools) == ["book_meeting", "crash", "free_days", "refuse", "slow"]
    assert tools["book_meeting"]["description"].startswith("Book a meeting on the calendar.")
    assert tools["book_meeting"]["parameters"] == {
        "type": "object",
        "properties": {"title": {"type": "string"}, "day": {"type": "string"}},
        "required": ["title", "day"],
    }
    assert second["messages"][-1] == {
        "role": "tool",
        "content": "Booked 'standup' on Friday.",
        "tool_call_id": second["messages"][-2]["tool_calls"][0]["id"],
    }
    assert calendar_children() == running  # the runner closed the session: the server exited


def test_over_http_the_auth_header_comes_from_the_environment(scripted, http_calendar):
    booking_script(scripted)
    server = MCPServer(
        url=http_calendar.url, headers={"Authorization": "Bearer ${env:CALENDAR_TOKEN}"}
    )
    with pytest.raises(FlinkAgentsError, match="needs a name"):
        react(server).to_plan()  # the server has no name to be declared under
    plan = react(server, tools={"calendar": server}).to_plan()  # the mapping names it
    assert [r.name for r in plan.resources] == ["chat_model", "calendar"]
    server = MCPServer(
        url=http_calendar.url, headers={"Authorization": env_ref("CALENDAR_AUTH")}, name="cal"
    )
    agent = react(server)
    plan = agent.to_plan()
    for text in (plan.to_json(), plan.to_yaml()):
        assert TOKEN not in text and LLM_KEY not in text
    [declared] = [r.args for r in plan.resources if r.name == "cal"]
    assert declared == {
        "url": http_calendar.url,
        "headers": {"Authorization": {"env": "CALENDAR_AUTH"}},
    }
    outputs, errors = run(plan_from_json(plan.to_json()), [REQUEST])
    assert outputs == ["Done. Booked 'standup' on Friday."] and errors == []


def test_a_wrong_token_is_a_clear_error_without_the_token(scripted, http_calendar, monkeypatch):
    monkeypatch.setenv("WRONG_TOKEN", "not-the-calendar-token")
    server = MCPServer(
        url=http_calendar.url, headers={"Authorization": "Bearer ${env:WRONG_TOKEN}"}, name="cal"
    )
    outputs, errors = run(react(server), [REQUEST], error_policy="error-output")
    assert outputs == []
    [error] = errors
    assert error["kind"] == "failed_run" and error["action"] == "start"
    assert error["error"].startswith(f"MCPServerError: MCP server 'cal' ({http_calendar.url})")
    assert "cannot connect" in error["error"]
    assert "not-the-calendar-token" not in json.dumps(errors)


def test_a_plan_file_declares_the_server_and_the_react_config_names_its_parts(
    scripted, ledger, tmp_path, monkeypatch
):
    """YAML: an ``mcp_server`` resource; ``tools`` names the server, ``prompt`` its prompt."""
    monkeypatch.setenv("CALENDAR_PYTHON", sys.executable)
    plan_file = tmp_path / "scheduler.yaml"
    plan_file.write_text(
        f"""
name: scheduler
actions:
  - name: start
    function: flink_agents.agents:ReActAgent.start
    listen_to: [InputEvent]
  - name: finish
    function: flink_agents.agents:ReActAgent.finish
    listen_to: [flink_agents.api:ChatResponseEvent]
resources:
  - name: llm
    type: chat_model
    provider: flink_agents.integrations.chat:OpenAIChatModel
    args: {{model: scripted, base_url: "${{env:TEST_LLM_URL}}", api_key_env: TEST_LLM_KEY}}
  - name: calendar
    type: mcp_server
    provider: flink_agents.integrations.mcp:MCPServer
    args:
      command: "${{env:CALENDAR_PYTHON}}"
      args: [{agents.SERVER_SCRIPT}]
      env: {{CALENDAR_LEDGER: "${{env:CALENDAR_LEDGER}}"}}
config:
  react: {{chat_model: llm, tools: [calendar], prompt: plan_day, max_steps: 4}}
"""
    )
    plan = load_plan(plan_file)
    booking_script(scripted)
    outputs, errors = run(plan, [REQUEST])
    assert outputs == ["Done. Booked 'standup' on Friday."] and errors == []
    assert bookings(ledger) == ["standup|Friday"]


def test_the_builtin_actions_take_a_server_as_tools_and_a_prompt_by_name(scripted, ledger):
    """No ReActAgent: an agent's own ChatRequestEvent names the server as its tools."""
    booking_script(scripted)
    outputs, errors = run(agents.Scheduler, [REQUEST])
    assert outputs == ["Done. Booked 'standup' on Friday."] and errors == []
    assert bookings(ledger) == ["standup|Friday"]


def test_a_tool_error_and_an_unknown_tool_are_told_to_the_model(scripted, ledger):
    scripted.add_rule(Rule(after_tool="free_days", reply_text="saw: {tool_result}"))
    scripted.add_rule(
        Rule(after_tool="no_such_tool", reply_tool_calls=[ToolCallSpec("free_days", {})])
    )
    scripted.add_rule(
        Rule(after_tool="refuse", reply_tool_calls=[ToolCallSpec("no_such_tool", {})])
    )
    scripted.add_rule(
        Rule(
            last_user_contains="The user asks",
            reply_tool_calls=[ToolCallSpec("refuse", {"reason": "busy"})],
        )
    )
    outputs, errors = run(react(stdio_calendar()), [REQUEST], error_policy="error-output")
    assert errors == []
    assert outputs == ["saw: Tuesday\nThursday"]
    told = [call.request["messages"][-1]["content"] for call in scripted.calls[1:3]]
    assert told[0].startswith("Error: MCPToolError: Error executing tool refuse")
    assert told[1] == "Error: no such tool"


# --- a server that dies --------------------------------------------------------------------


def test_a_stdio_server_that_dies_mid_run_fails_the_run_under_the_error_policy(scripted, ledger):
    """The model makes the server crash: that run goes to the error output naming the
    server (no hang, no model told); the next record starts the server again."""
    booking_script(scripted)
    scripted.add_rule(
        Rule(last_user_contains="crash", reply_tool_calls=[ToolCallSpec("crash", {})])
    )
    runner = LocalRunner(react(stdio_calendar()), options=ERROR_OUTPUT)
    started = time.monotonic()
    assert runner.run("bo", {**REQUEST, "user": "bo", "request": "Please crash."}) == []
    assert time.monotonic() - started < 30
    assert runner.run("ana", REQUEST) == ["Done. Booked 'standup' on Friday."]
    runner.engine.close()
    [error] = runner.errors
    assert error["kind"] == "failed_run" and error["key"] == "bo"
    assert error["action"] == "tool_call_action"
    message = error["error"]
    assert message.startswith("MCPServerError: MCP server 'calendar' (stdio: python"), message
    assert "lost the connection during tool call 'crash'" in message
    assert bookings(ledger) == ["standup|Friday"]


def test_an_http_server_that_dies_mid_run_is_a_failed_run_naming_it(scripted, http_calendar):
    booking_script(scripted)
    server = MCPServer(
        url=http_calendar.url, headers={"Authorization": env_ref("CALENDAR_AUTH")}, name="cal"
    )
    runner = LocalRunner(react(server), options=ERROR_OUTPUT)
    assert runner.run("ana", REQUEST) == ["Done. Booked 'standup' on Friday."]
    http_calendar.kill()
    started = time.monotonic()
    assert runner.run("bo", {**REQUEST, "user": "bo"}) == []
    assert time.monotonic() - started < 30
    [error] = runner.errors
    assert error["key"] == "bo" and error["action"] == "start"  # the prompt's server is gone
    assert error["error"].startswith(f"MCPServerError: MCP server 'cal' ({http_calendar.url})")
    assert TOKEN not in json.dumps(runner.errors)
    runner.engine.close()


# --- durable calls -------------------------------------------------------------------------


def test_tool_calls_are_replayed_not_repeated_after_a_restore(scripted, ledger):
    booking_script(scripted)
    log = InMemoryActionLog()
    first = LocalRunner(react(stdio_calendar()), journal=ActionJournal(log, "job"))
    checkpoint = first.snapshot()
    assert first.run("ana", REQUEST) == ["Done. Booked 'standup' on Friday."]
    first.engine.journal.flush()  # the attempt's records reach the log; then the job fails
    first.engine.resources.close()

    second = LocalRunner(react(stdio_calendar()), journal=ActionJournal(log, "job"))
    second.restore(checkpoint)
    assert second.run("ana", REQUEST) == ["Done. Booked 'standup' on Friday."]
    second.engine.close()
    assert bookings(ledger) == ["standup|Friday"]  # booked once, not twice
    assert scripted.call_count("chat") == 2  # the model was not asked again either


def test_a_retried_tool_action_reuses_the_calls_it_made_before_the_server_died(scripted, ledger):
    """One tool request books, then crashes the server: under the retry policy the action
    runs again and gets the booking from the action log instead of booking twice."""
    scripted.add_rule(
        Rule(
            last_user_contains="The user asks",
            reply_tool_calls=[
                ToolCallSpec("book_meeting", {"title": "standup", "day": "Friday"}),
                ToolCallSpec("crash", {}),
            ],
        )
    )
    options = dict(error_policy="retry", retry_max_attempts=3, retry_initial_backoff_ms=1)
    outputs, errors = run(react(stdio_calendar()), [REQUEST], **options)
    assert outputs == []
    [error] = errors
    assert error["action"] == "tool_call_action" and error["attempts"] == 3
    assert "MCP server 'calendar'" in error["error"]
    assert bookings(ledger) == ["standup|Friday"]  # three attempts, one booking


# --- the resource ---------------------------------------------------------------------------


def test_tools_are_listed_once_per_process(scripted, ledger, monkeypatch):
    listings: list[str] = []
    original = MCPServer._list

    def counting(self, kind, page):
        listings.append(kind)
        return original(self, kind, page)

    monkeypatch.setattr(MCPServer, "_list", counting)
    scripted.add_rule(Rule(reply_text="ok"))
    records = [{**REQUEST, "user": user} for user in ("a", "b", "c", "d")]
    outputs, _ = run(react(stdio_calendar()), records)
    assert outputs == ["ok"] * 4
    assert sorted(listings) == ["prompts", "tools"]


def test_the_server_in_code_lists_calls_and_renders(ledger):
    running = calendar_children()
    server = stdio_calendar()
    try:
        book = server.get_tool("book_meeting")
        assert isinstance(book, MCPTool)
        assert book.call({"title": "review", "day": "Monday"}) == "Booked 'review' on Monday."
        with pytest.raises(MCPToolError, match="validation error"):
            book.call({"title": 3})
        assert server.list_prompts() == ["plan_day"]
        prompt = server.get_prompt("plan_day")
        assert isinstance(prompt, MCPPrompt) and prompt.variables == ["day", "request", "mood"]
        text = prompt.format(day="Sunday", request="rest", mood="lazy", unused=1)
        assert text.startswith("You plan a lazy Sunday")
        with pytest.raises(FlinkAgentsError, match="prompt variable 'request' was not given"):
            prompt.format(day="Sunday")
    finally:
        server.close()
    assert bookings(ledger) == ["review|Monday"]
    assert calendar_children() == running


def test_tools_are_awaited_from_an_event_loop_without_blocking_it(ledger):
    """``acall`` connects on a thread of its own, answers what ``call`` answers, maps the
    same errors, and leaves the caller's loop free while the server works."""
    server = stdio_calendar(timeout=2)

    async def scenario() -> tuple[str, str, int]:
        book = server.get_tool("book_meeting")
        booked = await book.acall({"title": "review", "day": "Monday"})
        with pytest.raises(MCPToolError, match="validation error"):
            await book.acall({"title": 3})
        ticks = 0
        calling = asyncio.ensure_future(server.get_tool("slow").acall({"seconds": 1}))
        while not calling.done():  # the loop goes on while the server sleeps
            ticks += 1
            await asyncio.sleep(0.01)
        return booked, calling.result(), ticks

    try:
        booked, slept, ticks = asyncio.run(scenario())
        assert booked == "Booked 'review' on Monday." and slept == "slept"
        assert ticks >= 3  # a blocking call would have let the loop tick once, at most
        with pytest.raises(MCPServerError) as caught:
            asyncio.run(server.get_tool("slow").acall({"seconds": 30}))
        assert str(caught.value).endswith("did not answer tool call 'slow' within 2s")
        assert asyncio.run(server.get_tool("slow").acall({"seconds": 0})) == "slept"
    finally:
        server.close()
    assert bookings(ledger) == ["review|Monday"]


def test_the_builtin_tool_action_awaits_mcp_tools_on_the_engines_loop(scripted, ledger):
    """The model request and the MCP tool call are both awaited on the engine's event loop:
    the pool of async threads is never made."""
    booking_script(scripted)
    runner = LocalRunner(agents.Scheduler)
    try:
        assert runner.run("ana", REQUEST) == ["Done. Booked 'standup' on Friday."]
        executor = runner.engine._executor  # (``close`` drops it)
    finally:
        runner.engine.close()
    assert executor is None
    assert bookings(ledger) == ["standup|Friday"]


def test_a_server_that_does_not_start_is_a_clear_error():
    server = MCPServer(sys.executable, ["-c", "import sys; sys.exit(2)"], name="broken")
    with pytest.raises(MCPServerError) as caught:
        server.list_tools()
    assert isinstance(caught.value, ToolUnavailableError)
    assert str(caught.value).startswith("MCP server 'broken' (stdio: python")
    assert "cannot connect" in str(caught.value)
    server.close()
    mute = MCPServer(sys.executable, ["-c", "import time; time.sleep(60)"], connect_timeout=1)
    started = time.monotonic()
    with pytest.raises(MCPServerError, match=r"\(stdio: python.*\) did not connect within 1s"):
        mute.list_prompts()
    assert time.monotonic() - started < 10
    mute.close()


def test_a_server_that_stops_answering_times_out_and_is_connected_again(ledger):
    server = stdio_calendar(timeout=1)
    try:
        started = time.monotonic()
        with pytest.raises(MCPServerError) as caught:
            server.get_tool("slow").call({"seconds": 30})
        assert time.monotonic() - started < 10
        assert str(caught.value) == (
            "MCP server 'calendar' (stdio: python3.11) did not answer tool call 'slow' within 1s"
        ).replace("python3.11", Path(sys.executable).name)
        assert server.get_tool("slow").call({"seconds": 0}) == "slept"  # a new session
    finally:
        server.close()


def test_secrets_given_in_code_are_refused_by_plans(scripted):
    server = MCPServer(url="http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer abc"})
    with pytest.raises(FlinkAgentsError, match="header 'Authorization' given in code"):
        server.descriptor()
    server = MCPServer("srv", env={"GITHUB_TOKEN": "ghp_abcdef"}, name="gh")
    with pytest.raises(FlinkAgentsError, match="env 'GITHUB_TOKEN' given in code"):
        react(server).to_plan()
    with pytest.raises(FlinkAgentsError, match="password in the URL"):
        MCPServer(url="http://me:pw12345@127.0.0.1:9/mcp").descriptor()
    # Plain settings go into the plan as they are.
    descriptor = MCPServer("srv", ["--fast"], env={"MODE": "x"}, timeout=5).descriptor()
    assert descriptor.provider == "flink_agents.integrations.mcp:MCPServer"
    assert descriptor.type is ResourceType.MCP_SERVER
    assert descriptor.args == {
        "command": "srv",
        "args": ["--fast"],
        "env": {"MODE": "x"},
        "timeout": 5,
    }


def test_a_plan_round_trips_with_the_server(scripted):
    plan = react(stdio_calendar()).to_plan()
    assert plan_from_yaml(plan.to_yaml()) == plan
    assert plan.config["react"]["tools"] == ["calendar"]
    assert plan.config["react"]["prompt"] == "plan_day"
    [server] = [r for r in plan.resources if r.type is ResourceType.MCP_SERVER]
    assert server.name == "calendar"
    assert server.provider == "flink_agents.integrations.mcp:MCPServer"


# --- on Flink -------------------------------------------------------------------------------


@pytest.mark.flink
@pytest.mark.slow
def test_a_react_agent_with_an_mcp_server_runs_in_minicluster(scripted, ledger, tmp_path):
    """Thread mode (the default): the server is started by the Python inside the
    TaskManager, its tools go to the model, the bookings are made once each."""
    scripted.add_rule(Rule(after_tool="book_meeting", reply_text="Done. {tool_result}"))
    for title in ("standup", "review"):
        call = ToolCallSpec("book_meeting", {"title": title, "day": "Friday"})
        scripted.add_rule(Rule(last_user_contains=f"Book the {title}", reply_tool_calls=[call]))
    environment = {
        **clean_environment(),
        "PYTHONPATH": str(REPO),
        "FLINK_AGENTS_DATA_DIR": str(tmp_path / "data"),
        "HOME": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "-m", "tests.integrations.mcp.flink_job"],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found == {
        "outputs": ["Done. Booked 'review' on Friday.", "Done. Booked 'standup' on Friday."],
        "errors": [],
    }
    assert sorted(bookings(ledger)) == ["review|Friday", "standup|Friday"]
    assert LLM_KEY not in result.stdout + result.stderr


# --- names -----------------------------------------------------------------------------------


def free_days() -> str:
    """A declared tool that shadows the server's tool of the same name."""
    return "every day"


def test_offered_names_resolve_to_one_server_and_declared_resources_win(ledger):
    server = {"type": "mcp_server", "provider": "flink_agents.integrations.mcp:MCPServer"}
    shadow = {"type": "tool", "provider": "flink_agents.api._tools:Tool.from_ref"}
    start = {"function": "flink_agents.agents:ReActAgent.start", "listen_to": ["InputEvent"]}
    plan = {
        "name": "names",
        "actions": [{"name": "start", **start}],
        "resources": [
            {"name": "calendar", **server, "args": agents.STDIO},
            {"name": "calendar2", **server, "args": agents.STDIO},
            {"name": "free_days", **shadow, "args": {"function": f"{__name__}:free_days"}},
        ],
    }
    plan = plan_from_json(json.dumps(plan))
    cache = ResourceCache(bind_plan(plan))
    try:
        assert cache.get("free_days", ResourceType.TOOL).call({}) == "every day"
        with pytest.raises(FlinkAgentsError) as ambiguous:
            cache.get("book_meeting", ResourceType.TOOL)
        assert str(ambiguous.value) == (
            "tool 'book_meeting' is offered by more than one resource of agent 'names': "
            "'calendar', 'calendar2'"
        )
        with pytest.raises(UnknownResourceError, match="nor offered by calendar, calendar2"):
            cache.get("no_such_tool", ResourceType.TOOL)
        assert cache.get("calendar").name == "calendar"  # the runner names the server
    finally:
        cache.close()
    assert bookings(ledger) == []


def test_an_mcp_tool_call_is_traced_as_a_tool_span_of_the_tool_action(scripted, ledger):
    pytest.importorskip("opentelemetry.sdk", reason="tracing needs the otel extra")
    from tests.tracing.otlp_receiver import OtlpReceiver

    booking_script(scripted)
    with OtlpReceiver() as receiver:
        outputs, _ = run(
            react(stdio_calendar()),
            [REQUEST],
            tracing="otlp",
            tracing_endpoint=receiver.http_endpoint,
        )
        spans = {span["span_id"]: span for span in receiver.spans()}
    assert outputs == ["Done. Booked 'standup' on Friday."]
    [call] = [s for s in spans.values() if s["name"] == "execute_tool book_meeting"]
    assert call["attributes"]["gen_ai.tool.name"] == "book_meeting"
    assert call["attributes"]["flink_agents.tool.source"] == "mcp"
    assert call["kind"] == "CLIENT"
    assert spans[call["parent_span_id"]]["name"] == "action tool_call_action"
    assert TOKEN not in str(spans) and LLM_KEY not in str(spans)
