"""The agent of the compatibility fixtures (``tests/compat/``, issue 40). FROZEN.

Every fixture directory beside this file holds a savepoint and an action-log database taken
by a job of this agent. Both name what is defined here: the event classes by module path and
field names (pickled into parked runs, queued events and log records), the actions by
``module:qualname`` (in parked runs and log records), the resources by name, and the
prompts of the durable calls by their text (a recorded call is matched by its arguments).
A restore with a later release must find all of them as they were: do not rename, move or
change anything here, its behaviour included. A release that needs another agent adds a
module of its own for its own fixture and leaves this one alone.

``CompatAgent`` dispatches on the record's ``kind``; every record has ``id``, ``key`` and
``kind``, and every output carries ``key``, ``id`` and ``kind``:

- ``ask``: the input action writes short-term memory (``runs``, ``history``, the object
  ``last``) and sensory memory (``input.*``), then asks the chat model resource
  ``record["model"]`` through the built-in chat action; ``answer`` (on the
  ``ChatResponseEvent``) stores the reply under ``answers.<id>`` and outputs it with what
  sensory memory held since the input action.
- ``twice``: ``twice`` (``async def``) asks ``record["models"][0]``, then
  ``record["models"][1]``, each by a durable call of its own, and outputs both replies.
- ``panel``: ``Consult`` has three ``async def`` listeners, ``first``, ``second`` and
  ``third`` (a fan-out group); each asks the models of ``record["plan"][member]`` in turn,
  keeps its last reply in sensory memory (``panel.<member>``) and all of them in short-term
  memory (``panel.<id>.<member>``), and sends ``Opinion``; ``collect`` outputs each opinion
  with the members sensory memory has heard from.
- ``probe``: outputs the key's short-term memory and its sensory memory's fields, and
  changes nothing.

The two chat model resources, ``llm`` and ``held_llm``, read their server from
``COMPAT_LLM_URL`` and ``COMPAT_HELD_LLM_URL``: the job that took a fixture pointed
``held_llm`` at a server that never answered before the stop, so the calls to it were in
flight when the savepoint was taken; a restore points both at one scripted server.
"""

from __future__ import annotations

from typing import Any

from flink_agents.api import (
    Agent,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceType,
    RunnerContext,
    action,
    resource,
)
from flink_agents.integrations.chat import OpenAIChatModel
from flink_agents.memory import to_dict

MODEL_SETTINGS = dict(
    model="scripted-stand-in",
    api_key="not-a-secret",
    # Long: the job that took the fixture held these calls for as long as it took to stop
    # it and copy its log; a client timeout meanwhile would have retried them.
    timeout=300.0,
    max_retries=2,
    retry_initial_wait=0.05,
    retry_max_wait=0.2,
)


class Twice(Event):
    """Ask two models in turn."""

    id: str
    text: str
    models: list[str]


class Consult(Event):
    """Ask the panel: each member asks the models its plan names, in turn."""

    id: str
    question: str
    plan: dict[str, list[str]]


class Opinion(Event):
    """A panel member is done."""

    id: str
    member: str


async def ask(ctx: RunnerContext, model_name: str, text: str) -> str:
    """The reply of the chat model resource ``model_name`` to ``text``, by a durable call."""
    model = ctx.get_resource(model_name, ResourceType.CHAT_MODEL)
    chat = model.achat if model.achat is not None else model.chat
    response = await ctx.durable_execute_async(
        chat, [ChatMessage(role=MessageRole.USER, content=text)]
    )
    return response.message.content


class CompatAgent(Agent):
    """See the module docstring."""

    @action(InputEvent)
    @staticmethod
    def receive(event: InputEvent, ctx: RunnerContext) -> None:
        record, stm, sensory = event.input, ctx.short_term_memory, ctx.sensory_memory
        kind, record_id = record["kind"], record["id"]
        if kind == "probe":
            output = {
                "key": ctx.key,
                "id": record_id,
                "kind": kind,
                "memory": to_dict(stm),
                "sensory": sorted(sensory.get_field_names()),
            }
            ctx.send_event(OutputEvent(output=output))
            return
        runs = (stm.get("runs") or 0) + 1
        stm.set("runs", runs)
        stm.set("history", [*(stm.get("history") or []), record_id])
        last = stm.new_object("last")  # replaces the previous run's object, fields and all
        last.set("id", record_id)
        last.set("kind", kind)
        sensory.set("input.id", record_id)
        sensory.set("input.runs", runs)
        if kind == "ask":
            message = ChatMessage(role=MessageRole.USER, content=f"{record_id}: {record['text']}")
            ctx.send_event(ChatRequestEvent(model=record["model"], messages=[message]))
        elif kind == "twice":
            ctx.send_event(Twice(id=record_id, text=record["text"], models=record["models"]))
        elif kind == "panel":
            ctx.send_event(Consult(id=record_id, question=record["text"], plan=record["plan"]))
        else:
            raise ValueError(f"unknown kind {kind!r}")

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: RunnerContext) -> None:
        sensory = ctx.sensory_memory
        record_id = sensory.get("input.id")
        reply = event.response.content
        ctx.short_term_memory.set(f"answers.{record_id}", reply)
        output = {
            "key": ctx.key,
            "id": record_id,
            "kind": "ask",
            "answer": reply,
            "tokens": event.usage.total_tokens,
            "runs": sensory.get("input.runs"),
        }
        ctx.send_event(OutputEvent(output=output))

    @action(Twice)
    @staticmethod
    async def twice(event: Twice, ctx: RunnerContext) -> None:
        replies = []
        for index, model_name in enumerate(event.models):
            replies.append(await ask(ctx, model_name, f"{event.id} call {index}: {event.text}"))
        ctx.short_term_memory.set(f"answers.{event.id}", replies)
        output = {
            "key": ctx.key,
            "id": event.id,
            "kind": "twice",
            "replies": replies,
            "runs": ctx.sensory_memory.get("input.runs"),
        }
        ctx.send_event(OutputEvent(output=output))

    @action(Consult)
    @staticmethod
    async def first(event: Consult, ctx: RunnerContext) -> None:
        await _member(event, ctx, "first")

    @action(Consult)
    @staticmethod
    async def second(event: Consult, ctx: RunnerContext) -> None:
        await _member(event, ctx, "second")

    @action(Consult)
    @staticmethod
    async def third(event: Consult, ctx: RunnerContext) -> None:
        await _member(event, ctx, "third")

    @action(Opinion)
    @staticmethod
    def collect(event: Opinion, ctx: RunnerContext) -> None:
        sensory = ctx.sensory_memory
        heard = sensory.get_object("panel")
        output = {
            "key": ctx.key,
            "id": event.id,
            "kind": "panel",
            "member": event.member,
            "opinion": sensory.get(f"panel.{event.member}"),
            "heard": sorted(heard.get_field_names()) if heard is not None else [],
            "runs": sensory.get("input.runs"),
        }
        ctx.send_event(OutputEvent(output=output))

    @resource(ResourceType.CHAT_MODEL, base_url="${env:COMPAT_LLM_URL}", **MODEL_SETTINGS)
    @staticmethod
    def llm(**settings: Any) -> OpenAIChatModel:
        return OpenAIChatModel(**settings)

    @resource(ResourceType.CHAT_MODEL, base_url="${env:COMPAT_HELD_LLM_URL}", **MODEL_SETTINGS)
    @staticmethod
    def held_llm(**settings: Any) -> OpenAIChatModel:
        return OpenAIChatModel(**settings)


async def _member(event: Consult, ctx: RunnerContext, name: str) -> None:
    replies = []
    for index, model_name in enumerate(event.plan[name]):
        text = f"{event.id} {name} call {index}: {event.question}"
        replies.append(await ask(ctx, model_name, text))
    ctx.sensory_memory.set(f"panel.{name}", replies[-1])
    ctx.short_term_memory.set(f"panel.{event.id}.{name}", replies)
    ctx.send_event(Opinion(id=event.id, member=name))
