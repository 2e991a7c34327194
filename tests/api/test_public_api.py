"""The public API: its exact surface, its import boundary, and the @action decorator."""

import ast
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import flink_agents.api as api
from flink_agents.api import ActionExecutionError, Agent, Event, InputEvent, OutputEvent, action

REPO = Path(__file__).resolve().parents[2]
API_DIR = REPO / "flink_agents" / "api"
FORBIDDEN = ("pyflink", "flink_agents.runtime", "flink_agents.plan", "flink_agents.memory")
ACTION_ATTR = "__flink_agents_listen_to__"


def test_public_names_are_pinned():
    """Change this list only when the public surface changes on purpose."""
    assert api.__all__ == [
        "ActionExecutionError",
        "Agent",
        "AgentBuilder",
        "AgentsExecutionEnvironment",
        "BaseChatModel",
        "BaseEmbeddingModel",
        "Budget",
        "BudgetExceededError",
        "CapacityManageStrategy",
        "ChatMessage",
        "ChatModelError",
        "ChatRequestEvent",
        "ChatResponse",
        "ChatResponseEvent",
        "ContentPart",
        "ContextRetrievalRequestEvent",
        "ContextRetrievalResponseEvent",
        "Counter",
        "DocumentPart",
        "EmbeddingError",
        "Event",
        "EventScheduled",
        "FlinkAgentsError",
        "ForgetKey",
        "FunctionTool",
        "Gauge",
        "Histogram",
        "HistogramStatistics",
        "ImagePart",
        "InputEvent",
        "Knowledge",
        "KnowledgeSet",
        "KnowledgeSetItem",
        "LongTermMemory",
        "LoopLimitExceededError",
        "MaxStepsExceededError",
        "MemoryObject",
        "MemoryPathError",
        "MemoryRef",
        "MemorySet",
        "MemorySetItem",
        "MemorySetNotFoundError",
        "MemoryType",
        "MemoryValueError",
        "MessageRole",
        "Meter",
        "MetricGroup",
        "ModelPrice",
        "OutputEvent",
        "PlanError",
        "Prompt",
        "PromptFormatError",
        "PromptSet",
        "ResourceDescriptor",
        "ResourceType",
        "RunnerContext",
        "ScheduleCancelled",
        "SizeRoute",
        "Skill",
        "SkillError",
        "Skills",
        "StructuredOutputError",
        "SubAgent",
        "TextPart",
        "TokenUsage",
        "Tool",
        "ToolArgumentsError",
        "ToolCall",
        "ToolRequestEvent",
        "ToolResponseEvent",
        "ToolResult",
        "ToolSet",
        "ToolSpec",
        "ToolUnavailableError",
        "UnknownResourceError",
        "WaitTimedOut",
        "action",
        "env_ref",
        "items_for_handoff",
        "resource",
        "tool",
    ]
    assert all(hasattr(api, name) for name in api.__all__)


def _imported_modules(path: Path) -> list[str]:
    package = "flink_agents.api"
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.append(module)
            names.extend(f"{module}.{alias.name}" for alias in node.names)
    return names


def _is_forbidden(module: str) -> bool:
    return any(module == f or module.startswith(f + ".") for f in FORBIDDEN)


@pytest.mark.parametrize("path", sorted(API_DIR.rglob("*.py")), ids=lambda p: p.name)
def test_api_module_does_not_import_the_runtime_or_pyflink(path):
    assert [m for m in _imported_modules(path) if _is_forbidden(m)] == []


def test_import_checker_catches_forbidden_imports(tmp_path):
    """The AST check above would notice each way of importing a forbidden module."""
    source = tmp_path / "bad.py"
    source.write_text(
        "import pyflink.datastream\n"
        "from flink_agents.runtime import RunEngine\n"
        "from .. import plan\n"
        "from ..memory import DictState\n"
        "importlib.import_module('flink_agents.runtime')\n"
    )
    assert [m for m in _imported_modules(source) if _is_forbidden(m)] == [
        "pyflink.datastream",
        "flink_agents.runtime",
        "flink_agents.runtime.RunEngine",
        "flink_agents.plan",
        "flink_agents.memory",
        "flink_agents.memory.DictState",
    ]


def test_importing_the_api_loads_neither_pyflink_nor_the_runtime():
    code = (
        "import flink_agents.api, sys; "
        "assert 'pyflink' not in sys.modules; "
        "assert not [m for m in sys.modules if m.startswith(('flink_agents.runtime', "
        "'flink_agents.plan', 'flink_agents.memory'))], sorted(sys.modules)"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr


# --- @action ----------------------------------------------------------------------------


class Ping(Event):
    pass


def test_action_works_above_staticmethod():
    class A(Agent):
        @action(InputEvent, Ping)
        @staticmethod
        def act(event, ctx) -> None:
            return None

    assert getattr(A.act, ACTION_ATTR) == (InputEvent, Ping)
    assert isinstance(vars(A)["act"], staticmethod)


def test_action_works_below_staticmethod():
    class A(Agent):
        @staticmethod
        @action(OutputEvent)
        def act(event, ctx) -> None:
            return None

    assert getattr(A.act, ACTION_ATTR) == (OutputEvent,)
    assert isinstance(vars(A)["act"], staticmethod)


def test_action_returns_the_decorated_member():
    def act(event, ctx) -> None:
        return None

    assert action(InputEvent)(act) is act


def test_action_needs_an_event_type():
    with pytest.raises(TypeError, match="at least one event type"):
        action()


@pytest.mark.parametrize(
    "bad",
    [dict, "InputEvent", InputEvent(input=1), Agent],
    ids=["class", "str", "instance", "agent"],
)
def test_action_rejects_what_is_not_an_event_class(bad):
    with pytest.raises(TypeError, match="takes Event subclasses"):
        action(InputEvent, bad)


# --- errors -----------------------------------------------------------------------------


def test_action_execution_error_survives_pickling():
    error = ActionExecutionError(
        key="k", action="act", input={"x": 1}, run_sequence=2, cause=ValueError("boom")
    )
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.key, copy.action, copy.input, copy.run_sequence) == ("k", "act", {"x": 1}, 2)
    assert str(copy) == str(error)
