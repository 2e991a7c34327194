"""Module-level agents and events for the runtime tests (plans refer to code as module:qualname)."""

import asyncio

from flink_agents.api import (
    Agent,
    Event,
    FlinkAgentsError,
    InputEvent,
    OutputEvent,
    ResourceType,
    action,
    resource,
)

# --- events -------------------------------------------------------------------------------


class Doubled(Event):
    value: int


class Labelled(Event):
    text: str


class Animal(Event):
    name: str


class Dog(Animal):
    pass


class Marker(Event):
    label: str


class Go(Event):
    fail: bool


class AfterFailure(Event):
    pass


class Ping(Event):
    pass


# --- agents -------------------------------------------------------------------------------


class EchoAgent(Agent):
    """Emits each input unchanged."""

    @action(InputEvent)
    @staticmethod
    def echo(event: InputEvent, ctx) -> None:
        ctx.send_event(OutputEvent(output=event.input))


class RepeatAgent(Agent):
    """Emits ``input["n"]`` outputs: ``[label, 0]``, ``[label, 1]``, ..."""

    @action(InputEvent)
    @staticmethod
    def repeat(event: InputEvent, ctx) -> None:
        for i in range(event.input["n"]):
            ctx.send_event(OutputEvent(output=[event.input.get("label"), i]))


class ChainAgent(Agent):
    """InputEvent -> Doubled -> Labelled -> output, each step its own action."""

    @action(InputEvent)
    @staticmethod
    def double(event: InputEvent, ctx) -> None:
        ctx.sensory_memory.set("original", event.input)
        ctx.send_event(Doubled(value=event.input * 2))

    @action(Doubled)
    @staticmethod
    def label(event: Doubled, ctx) -> None:
        ctx.short_term_memory.set("last", event.value)
        ctx.send_event(Labelled(text=f"{ctx.sensory_memory.get('original')}->{event.value}"))

    @action(Labelled)
    @staticmethod
    def emit(event: Labelled, ctx) -> None:
        ctx.send_event(OutputEvent(output=event.text))


class SubclassAgent(Agent):
    """Sends a ``Dog``; the action listening to ``Animal`` must see it."""

    @action(InputEvent)
    @staticmethod
    def adopt(event: InputEvent, ctx) -> None:
        ctx.send_event(Dog(name=event.input))

    @action(Animal)
    @staticmethod
    def greet(event: Animal, ctx) -> None:
        ctx.send_event(OutputEvent(output=f"{type(event).__name__}:{event.name}"))


class TwoListenersAgent(Agent):
    """Two actions on the same event, declared second-then-first to check plan order."""

    @action(InputEvent)
    @staticmethod
    def second(event: InputEvent, ctx) -> None:
        ctx.send_event(OutputEvent(output="second"))

    @action(InputEvent)
    @staticmethod
    def first(event: InputEvent, ctx) -> None:
        ctx.send_event(OutputEvent(output="first"))


class FifoAgent(Agent):
    """The input sends markers A and B; handling A sends C. FIFO order is A, B, C."""

    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx) -> None:
        ctx.send_event(Marker(label="A"))
        ctx.send_event(Marker(label="B"))

    @action(Marker)
    @staticmethod
    def handle(event: Marker, ctx) -> None:
        ctx.send_event(OutputEvent(output=event.label))
        if event.label == "A":
            ctx.send_event(Marker(label="C"))


class SensoryAgent(Agent):
    """Writes sensory memory in one action and reads it in the next action of the run."""

    @action(InputEvent)
    @staticmethod
    def write(event: InputEvent, ctx) -> None:
        before = ctx.sensory_memory.get("seen")
        ctx.sensory_memory.set("seen", event.input)
        ctx.sensory_memory.new_object("nested").set("value", event.input)
        ctx.send_event(Labelled(text="" if before is None else str(before)))

    @action(Labelled)
    @staticmethod
    def read(event: Labelled, ctx) -> None:
        ctx.send_event(
            OutputEvent(
                output={
                    "before": event.text or None,
                    "seen": ctx.sensory_memory.get("seen"),
                    "nested": ctx.sensory_memory.get("nested.value"),
                }
            )
        )


class CounterAgent(Agent):
    """Counts the runs of a key in short-term memory and remembers its inputs."""

    @action(InputEvent)
    @staticmethod
    def count(event: InputEvent, ctx) -> None:
        count = (ctx.short_term_memory.get("count") or 0) + 1
        ctx.short_term_memory.set("count", count)
        inputs = ctx.short_term_memory.get("inputs") or []
        ctx.short_term_memory.set("inputs", [*inputs, event.input])
        ctx.send_event(OutputEvent(output=count))


class FailingAgent(Agent):
    """``prepare`` writes memory and sends ``Go``; ``explode`` writes, deletes and sends
    events, then raises when the input has ``fail`` set; ``after`` follows ``explode``."""

    @action(InputEvent)
    @staticmethod
    def prepare(event: InputEvent, ctx) -> None:
        ctx.short_term_memory.set("kept", event.input["id"])
        ctx.sensory_memory.set("kept", event.input["id"])
        ctx.send_event(Go(fail=event.input.get("fail", False)))

    @action(Go)
    @staticmethod
    def explode(event: Go, ctx) -> None:
        ctx.short_term_memory.delete("kept")
        ctx.short_term_memory.set("lost", 1)
        ctx.short_term_memory.new_object("lost_object").set("x", 1)
        ctx.sensory_memory.delete("kept")
        ctx.sensory_memory.set("lost", 1)
        ctx.send_event(OutputEvent(output="exploded"))
        ctx.send_event(AfterFailure())
        if event.fail:
            raise ValueError("boom")

    @action(AfterFailure)
    @staticmethod
    def after(event: AfterFailure, ctx) -> None:
        ctx.short_term_memory.set("after", True)
        ctx.send_event(OutputEvent(output="after"))


class AsyncAgent(Agent):
    """An ``async def`` action that awaits before writing memory and emitting."""

    @action(InputEvent)
    @staticmethod
    async def work(event: InputEvent, ctx) -> None:
        await asyncio.sleep(0)
        total = (ctx.short_term_memory.get("total") or 0) + event.input
        ctx.short_term_memory.set("total", total)
        ctx.send_event(OutputEvent(output=total))


class LoopAgent(Agent):
    """Re-sends the event it listens to: a run that never ends on its own."""

    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx) -> None:
        ctx.send_event(Ping())

    @action(Ping)
    @staticmethod
    def again(event: Ping, ctx) -> None:
        ctx.send_event(Ping())


class BadSendAgent(Agent):
    """Sends what the input names: a plain dict or an ``InputEvent``."""

    @action(InputEvent)
    @staticmethod
    def send(event: InputEvent, ctx) -> None:
        if event.input == "dict":
            ctx.send_event({"output": 1})
        elif event.input == "input":
            ctx.send_event(InputEvent(input=1))


class ConfigAgent(Agent):
    """Emits its key and the config it sees."""

    config = {"greeting": "hello", "level": 1}

    @action(InputEvent)
    @staticmethod
    def show(event: InputEvent, ctx) -> None:
        try:
            ctx.config["greeting"] = "changed"
            writable = True
        except TypeError:
            writable = False
        ctx.send_event(
            OutputEvent(output={"key": ctx.key, "config": dict(ctx.config), "writable": writable})
        )


# --- resources ----------------------------------------------------------------------------

PROVIDER_CALLS: list[dict] = []


class Store:
    """What the resource provider creates."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix


class ResourceAgent(Agent):
    """``input["mode"]`` picks how the action asks for the ``store`` resource."""

    @resource(ResourceType.CUSTOM, prefix="db")
    @staticmethod
    def store(prefix: str) -> Store:
        PROVIDER_CALLS.append({"prefix": prefix})
        return Store(prefix)

    @action(InputEvent)
    @staticmethod
    def use(event: InputEvent, ctx) -> None:
        mode = event.input["mode"]
        if mode == "none":
            ctx.send_event(OutputEvent(output=None))
            return
        try:
            if mode == "typed":
                found = ctx.get_resource("store", ResourceType.CUSTOM)
            elif mode == "untyped":
                found = ctx.get_resource("store")
            elif mode == "wrong_type":
                found = ctx.get_resource("store", ResourceType.CHAT_MODEL)
            else:
                found = ctx.get_resource("no_such_resource")
        except FlinkAgentsError as error:
            found = error
        ctx.send_event(OutputEvent(output=found))


def triple(value: int) -> int:
    return 3 * value


class SyncThenAsyncAgent(Agent):
    """A plain action (with a durable call of its own when the input asks for one), then an
    ``async def`` action that awaits a durable call."""

    @action(InputEvent)
    @staticmethod
    def prepare(event: InputEvent, ctx) -> None:
        value = event.input["value"]
        if event.input.get("call"):
            value = ctx.durable_execute(triple, value)
        ctx.short_term_memory.set("prepared", value)
        ctx.send_event(OutputEvent(output=("prepared", value)))
        ctx.send_event(Doubled(value=value))

    @action(Doubled)
    @staticmethod
    async def finish(event: Doubled, ctx) -> None:
        value = await ctx.durable_execute_async(triple, event.value)
        ctx.send_event(OutputEvent(output=("finished", value)))


class WritesAroundCallAgent(Agent):
    """A plain action that writes both memories, makes a durable call (even inputs), and
    writes again: what it wrote before the call belongs to its action-log record too. A
    second action reads it all back, and counts its runs in short-term memory: a plain
    action after one that turned into a buffered one must write the key's state, not that
    buffer."""

    @action(InputEvent)
    @staticmethod
    def prepare(event: InputEvent, ctx) -> None:
        memory = ctx.short_term_memory
        memory.set("before", event.input)
        memory.new_object("box").set("x", event.input)
        ctx.sensory_memory.set("seen", event.input)
        value = event.input
        if value % 2 == 0:
            memory.delete("box")
            value = ctx.durable_execute(triple, value)
        memory.set("after", value)
        ctx.send_event(Doubled(value=value))

    @action(Doubled)
    @staticmethod
    def report(event: Doubled, ctx) -> None:
        memory = ctx.short_term_memory
        memory.set("reports", (memory.get("reports") or 0) + 1)
        ctx.send_event(
            OutputEvent(
                output=(
                    memory.get("before"),
                    memory.get("after"),
                    memory.is_exist("box"),
                    ctx.sensory_memory.get("seen"),
                    event.value,
                )
            )
        )


class Stop(BaseException):
    """Not an ``Exception``: what stops a process (``KeyboardInterrupt``, ``SystemExit``)."""


class StoppedAgent(Agent):
    """Writes its input to short-term memory, then stops the process when it is "stop"."""

    @action(InputEvent)
    @staticmethod
    def write(event: InputEvent, ctx) -> None:
        ctx.short_term_memory.set("last", event.input)
        ctx.sensory_memory.set("seen", event.input)
        if event.input == "stop":
            raise Stop
        ctx.send_event(OutputEvent(output=event.input))


class Note(Event):
    text: str


class LoudNote(Note):
    """Triggers the actions of ``Note`` too: those of either class, in plan order."""


class Shouted(OutputEvent):
    """An ``OutputEvent`` subclass: its ``output`` is an output of the run too."""

    loud: bool = True


class RoutingAgent(Agent):
    """Routes by event class: a subclass reaches the actions of its base classes, in plan
    order, and an ``OutputEvent`` subclass is an output."""

    @action(InputEvent)
    @staticmethod
    def start(event: InputEvent, ctx) -> None:
        ctx.send_event(LoudNote(text=event.input))
        ctx.send_event(Note(text=event.input.upper()))

    @action(LoudNote)
    @staticmethod
    def loud(event: LoudNote, ctx) -> None:
        ctx.send_event(Shouted(output=("loud", event.text)))

    @action(Note)
    @staticmethod
    def any_note(event: Note, ctx) -> None:
        ctx.send_event(OutputEvent(output=("note", event.text)))
