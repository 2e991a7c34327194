"""Agents in Flink SQL pipelines: ``from_table`` feeds an agent the rows of a query (as dicts),
``to_table`` turns its outputs into rows of a declared schema for SQL, and outputs that do not
fit go to the error output.

Three MiniCluster jobs (about 20 s each): the whole path in thread mode (the default), the
same with a ``Schema``, a row type and a derived table environment in process mode, and the
example of ``docs/sql.md`` as written. The rest builds graphs or calls the conversions
directly, without running a job.
"""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import cloudpickle
import pytest
from pydantic import BaseModel, field_validator
from pyflink.common import Row, RowKind, Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.table import DataTypes, EnvironmentSettings, Schema, StreamTableEnvironment
from pyflink.table import TableEnvironment as PlainTableEnvironment

from flink_agents.api import (
    Agent,
    AgentsExecutionEnvironment,
    Event,
    FlinkAgentsError,
    InputEvent,
    OutputEvent,
    action,
)
from flink_agents.runtime.flink._dispatcher import ERROR_TAG
from flink_agents.runtime.flink._table import (
    OutputDoesNotFit,
    OutputRows,
    output_shape,
    payload_row,
    row_to_dict,
    sql_name,
)
from flink_agents.testing import clean_environment
from tests.runtime.flink.runners import flink_environment
from tests.runtime.flink.test_shipping import imported_globals

REPO = Path(__file__).resolve().parents[3]


# -- Agents and schemas the jobs use (workers import them from this module) ------------------


class Reply(BaseModel):
    """A row of the replies table."""

    customer: str
    ticket: int
    channel: str
    words: int
    amount: Decimal | None
    tags: list[str]
    created: datetime.datetime | None
    types: str


class ReplyAgent(Agent):
    """Replies to each ticket row; two kinds of ticket make outputs that do not fit Reply."""

    @action(InputEvent)
    @staticmethod
    def reply(event: InputEvent, ctx: Any) -> None:
        row = event.input
        types = " ".join(f"{name}={type(value).__name__}" for name, value in sorted(row.items()))
        fields = {
            "customer": row["customer"],
            "ticket": row["id"],
            "channel": row["meta"]["channel"],
            "words": len(row["body"].split()),
            "amount": row["amount"],
            "tags": row["tags"],
            "created": row["created"],
            "types": types,
        }
        if "wrong-type" in row["body"]:
            ctx.send_event(OutputEvent(output={**fields, "words": "many"}))
        elif "half" in row["body"]:
            ctx.send_event(OutputEvent(output={"customer": row["customer"]}))
        elif "thanks" in row["body"]:
            ctx.send_event(OutputEvent(output=fields))  # a dict the model validates
        else:
            ctx.send_event(OutputEvent(output=Reply(**fields)))


class Nudge(Event):
    """A signal from a second table (``with_signals``): it starts a run of its own."""

    text: str


class NudgedReplyAgent(ReplyAgent):
    """``ReplyAgent``, replying to a nudge too (no run waits for one)."""

    @action(Nudge)
    @staticmethod
    def nudged(event: Nudge, ctx: Any) -> None:
        reply = Reply(
            customer=ctx.key,
            ticket=0,
            channel="signal",
            words=len(event.text.split()),
            amount=None,
            tags=[],
            created=None,
            types="",
        )
        ctx.send_event(OutputEvent(output=reply))


class NoteAgent(Agent):
    """A note per row, with the row's time; a note on "late" tickets has a string time."""

    @action(InputEvent)
    @staticmethod
    def note(event: InputEvent, ctx: Any) -> None:
        row = event.input
        at = "yesterday" if "late" in row["body"] else row["created"]
        ctx.send_event(
            OutputEvent(output={"customer": ctx.key, "note": row["body"], "seen_at": at})
        )


class ShoutAgent(Agent):
    """A bare string per row: the one column of its table."""

    @action(InputEvent)
    @staticmethod
    def shout(event: InputEvent, ctx: Any) -> None:
        ctx.send_event(OutputEvent(output=event.input["body"].upper()))


TICKETS = [
    {"id": 1, "customer": "ana", "body": "refund my order", "amount": 12.5, "tags": ["billing"],
     "meta": {"channel": "chat", "score": 0.9}, "created": "2024-05-01 10:00:00.000"},
    {"id": 2, "customer": "bo", "body": "site is down again", "amount": None, "tags": [],
     "meta": {"channel": "mail", "score": 0.5}, "created": "2024-05-01 10:20:00.000"},
    {"id": 3, "customer": "ana", "body": "wrong-type please", "amount": 1, "tags": [],
     "meta": {"channel": "chat", "score": 0.1}, "created": "2024-05-01 10:30:00.000"},
    {"id": 4, "customer": "cy", "body": "half", "amount": 2, "tags": ["x"],
     "meta": {"channel": "chat", "score": 0.2}, "created": "2024-05-01 11:10:00.000"},
    {"id": 5, "customer": "bo", "body": "thanks for the fix", "amount": 3, "tags": ["ok"],
     "meta": {"channel": "mail", "score": 0.7}, "created": "2024-05-01 11:20:00.000"},
    {"id": 6, "customer": "ana", "body": "invoice is late", "amount": 7.25, "tags": ["billing"],
     "meta": {"channel": "phone", "score": 0.8}, "created": "2024-05-01 11:40:00.000"},
    {"id": 7, "customer": "dee", "body": "buy cheap pills", "amount": None, "tags": [],
     "meta": {"channel": "spam", "score": 0.0}, "created": "2024-05-01 12:00:00.000"},
]  # fmt: skip

TICKETS_DDL = """
    CREATE TABLE tickets (
        id BIGINT, customer STRING, body STRING, amount DECIMAL(10, 2), tags ARRAY<STRING>,
        meta ROW<channel STRING, score DOUBLE>, created TIMESTAMP(3)
    ) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'json')
"""
NOT_SPAM = "SELECT * FROM tickets WHERE meta.channel <> 'spam'"


def tickets_table(t_env: StreamTableEnvironment, tmp_path: Path) -> Any:
    """The tickets as a JSON-lines file, registered with SQL DDL; the query drops spam."""
    path = tmp_path / "tickets.jsonl"
    path.write_text("".join(json.dumps(ticket) + "\n" for ticket in TICKETS))
    t_env.execute_sql(TICKETS_DDL.format(path=path))
    return t_env.sql_query(NOT_SPAM)


def tagged(stream: Any, tag: str) -> Any:
    """``(tag, row kind, values)`` for each row of ``stream``, pickled, for one collect
    (the values as plain Python, as the agent gets them: thread mode hands over Java times)."""
    return stream.map(
        lambda row: (tag, row.get_row_kind().name, tuple(row_to_dict(row).values())),
        output_type=Types.PICKLED_BYTE_ARRAY(),
    )


def collect(*streams: Any) -> dict[str, list[tuple[str, Any]]]:
    """Run the job once and sort what each stream produced by its tag."""
    by_tag: dict[str, list[tuple[str, Any]]] = {}
    with streams[0].union(*streams[1:]).execute_and_collect() as results:
        for tag, kind, value in results:
            by_tag.setdefault(tag, []).append((kind, value))
    return by_tag


def final_rows(changes: list[tuple[str, tuple]]) -> dict[Any, tuple]:
    """A changelog folded into the latest row per key (the first column)."""
    latest: dict[Any, tuple] = {}
    for kind, values in changes:
        if kind in (RowKind.INSERT.name, RowKind.UPDATE_AFTER.name):
            latest[values[0]] = values
        else:
            latest.pop(values[0], None)
    return latest


# -- MiniCluster jobs ----------------------------------------------------------------------------


@pytest.mark.flink
def test_an_agent_between_sql_queries_in_thread_mode(tmp_path):
    """SQL DDL and a query feed the agent dicts; its outputs are rows of Reply that SQL
    aggregates; outputs that do not fit Reply are error records; signals from a second
    table (``with_signals``), one of them bad; one job, thread mode."""
    env = flink_environment(mode=None)
    t_env = StreamTableEnvironment.create(env)
    agents = AgentsExecutionEnvironment.get_execution_environment(env, t_env)
    nudges = t_env.from_elements(
        [("dee", "please call me back"), ("bo", None)], ["customer", "text"]
    )
    pipeline = (
        agents.from_table(tickets_table(t_env, tmp_path), "customer")
        .with_signals(nudges, "customer", event_type=Nudge)
        .apply(NudgedReplyAgent)
    )
    t_env.create_temporary_view("replies", pipeline.to_table(Reply))
    per_customer = t_env.sql_query(
        "SELECT customer, COUNT(*) AS replies, SUM(words) AS words, MAX(amount) AS top "
        "FROM replies GROUP BY customer"
    )
    replies = t_env.sql_query("SELECT ticket, channel, tags, created, types FROM replies")
    errors = pipeline.error_stream().map(
        lambda error: ("error", error["kind"], error), output_type=Types.PICKLED_BYTE_ARRAY()
    )
    found = collect(
        tagged(t_env.to_changelog_stream(per_customer), "per_customer"),
        tagged(t_env.to_data_stream(replies), "replies"),
        errors,
    )

    assert final_rows(found["per_customer"]) == {
        "ana": ("ana", 2, 6, Decimal("12.5")),
        "bo": ("bo", 2, 8, Decimal("3")),
        "dee": ("dee", 1, 4, None),  # the nudge's reply
    }
    rows = {values[0]: values[1:] for _, values in found["replies"]}
    assert sorted(rows) == [0, 1, 2, 5, 6]  # 3 and 4 did not fit, 7 never reached the agent
    assert rows[0][0] == "signal"
    assert rows[1][:3] == ("chat", ["billing"], datetime.datetime(2024, 5, 1, 10, 0))
    assert rows[2][1] == []
    # Each row reached the agent as a dict of column -> Python value, nested rows as dicts.
    assert rows[1][3] == (
        "amount=Decimal body=str created=datetime customer=str id=int meta=dict tags=list"
    )
    assert rows[2][3].startswith("amount=NoneType")

    (bad_signal,) = [e for _, e in found["error"] if e["kind"] == "rejected"]
    assert bad_signal["input"] == {"customer": "bo", "text": None}
    assert bad_signal["reason"].startswith("not a Nudge signal: 1 validation error for Nudge")
    errors = sorted((e["output"]["customer"], e) for _, e in found["error"] if "output" in e)
    assert [(customer, e["kind"]) for customer, e in errors] == [
        ("ana", "rejected_output"),
        ("cy", "rejected_output"),
    ]
    assert errors[0][1]["reason"].startswith("output does not fit Reply: words: Input should be")
    assert errors[0][1]["output"]["words"] == "many"
    assert errors[1][1]["reason"].startswith("output does not fit Reply: ticket: Field required")


@pytest.mark.flink
def test_schema_and_row_type_outputs_in_process_mode(tmp_path):
    """A ``Schema`` with a computed column and a watermark (its TIMESTAMP column bridged),
    a windowed query over it, and a one-column row type taking bare strings; the table
    environment comes from the input table; PyFlink's process mode."""
    env = flink_environment(mode="process")
    t_env = StreamTableEnvironment.create(env)
    agents = AgentsExecutionEnvironment.get_execution_environment(env)
    tickets = tickets_table(t_env, tmp_path)
    notes = agents.from_table(tickets, "customer").apply(NoteAgent)
    shouts = agents.from_table(tickets, lambda row: row["id"] % 2).apply(ShoutAgent)
    assert agents.t_env is t_env
    schema = (
        Schema.new_builder()
        .column("customer", "STRING NOT NULL")
        .column("note", DataTypes.STRING())
        .column("seen_at", DataTypes.TIMESTAMP(3))
        .column_by_expression("note_length", "CHAR_LENGTH(note)")
        .watermark("seen_at", "seen_at - INTERVAL '1' SECOND")
        .build()
    )
    t_env.create_temporary_view("notes", notes.to_table(schema))
    shout_table = shouts.to_table(DataTypes.ROW([DataTypes.FIELD("shout", DataTypes.STRING())]))
    hourly = t_env.sql_query(
        "SELECT window_start, COUNT(*) AS notes, SUM(note_length) AS chars "
        "FROM TABLE(TUMBLE(TABLE notes, DESCRIPTOR(seen_at), INTERVAL '1' HOUR)) "
        "GROUP BY window_start, window_end"
    )
    errors = notes.error_stream().map(
        lambda error: ("error", error["kind"], error), output_type=Types.PICKLED_BYTE_ARRAY()
    )
    found = collect(
        tagged(t_env.to_data_stream(hourly), "hourly"),
        tagged(t_env.to_data_stream(shout_table), "shouts"),
        errors,
    )

    ten, eleven = datetime.datetime(2024, 5, 1, 10), datetime.datetime(2024, 5, 1, 11)
    assert sorted(values for _, values in found["hourly"]) == [
        (ten, 3, len("refund my order") + len("site is down again") + len("wrong-type please")),
        (eleven, 2, len("half") + len("thanks for the fix")),
    ]
    assert sorted(values[0] for _, values in found["shouts"]) == sorted(
        t["body"].upper() for t in TICKETS if t["meta"]["channel"] != "spam"
    )
    ((_, error),) = found["error"]
    assert error["reason"] == (
        "output does not fit the table's schema: "
        "column 'seen_at' is TIMESTAMP(3), got str 'yesterday'"
    )
    assert error["output"]["note"] == "invoice is late"


@pytest.mark.flink
def test_the_sql_doc_example_runs_as_written(tmp_path):
    doc = (REPO / "docs" / "sql.md").read_text()
    (code,) = [b for b in re.findall(r"```python\n(.*?)```", doc, re.S) if "execute_sql" in b]
    expected = re.search(r"^# (\[.*\])$", code, re.M).group(1)
    script = tmp_path / "sql_example.py"
    script.write_text(code)
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=REPO,
        env={"PATH": clean_environment()["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == expected


# -- Building the tables (no job runs) ----------------------------------------------------------


def table_setup(tmp_path: Path) -> tuple[Any, StreamTableEnvironment, Any]:
    env = StreamExecutionEnvironment.get_execution_environment()
    t_env = StreamTableEnvironment.create(env)
    agents = AgentsExecutionEnvironment.get_execution_environment(env, t_env)
    return agents, t_env, tickets_table(t_env, tmp_path)


def columns(table: Any) -> list[str]:
    schema = table._j_table.getResolvedSchema()
    return [str(column).replace("`", "") for column in schema.getColumns()]


def test_a_model_declares_the_columns_and_their_nullability(tmp_path):
    agents, _, tickets = table_setup(tmp_path)
    table = agents.from_table(tickets, "customer").apply(ReplyAgent).to_table(Reply)
    assert columns(table) == [
        "customer STRING NOT NULL",
        "ticket BIGINT NOT NULL",
        "channel STRING NOT NULL",
        "words BIGINT NOT NULL",
        "amount DECIMAL(38, 18)",
        "tags ARRAY<STRING NOT NULL> NOT NULL",
        "created TIMESTAMP(3)",
        "types STRING NOT NULL",
    ]


def test_a_schema_keeps_its_computed_columns_watermark_and_key(tmp_path):
    agents, _, tickets = table_setup(tmp_path)
    schema = (
        Schema.new_builder()
        .column("customer", "STRING NOT NULL")
        .column("seen_at", "TIMESTAMP(3)")
        .column("day", DataTypes.DATE())
        .column_by_expression("who", "UPPER(customer)")
        .watermark("seen_at", "seen_at - INTERVAL '5' SECOND")
        .primary_key("customer")
        .build()
    )
    table = agents.from_table(tickets, "customer").apply(NoteAgent).to_table(schema)
    assert columns(table) == [
        "customer STRING NOT NULL",
        "seen_at TIMESTAMP(3) *ROWTIME*",
        "day DATE",
        "who STRING NOT NULL AS UPPER(customer)",
    ]
    resolved = table._j_table.getResolvedSchema()
    assert list(resolved.getPrimaryKey().get().getColumns()) == ["customer"]
    assert "seen_at - INTERVAL '5' SECOND" in str(resolved.getWatermarkSpecs().get(0))


def test_apache_flink_agents_form_schema_and_output_type(tmp_path):
    """A ``Schema`` for the table and a ``RowTypeInfo`` for the rows; the Schema's time
    columns are bridged to the java.sql values PyFlink produces (else the first row fails
    the job), and a Schema without physical columns takes them from the row type."""
    agents, _, tickets = table_setup(tmp_path)
    output_type = Types.ROW_NAMED(["shout", "at"], [Types.STRING(), Types.SQL_TIMESTAMP()])
    schema = Schema.new_builder().column("shout", "STRING").column("at", "TIMESTAMP(3)").build()
    table = agents.from_table(tickets).apply(ShoutAgent).to_table(schema, output_type)
    assert columns(table) == ["shout STRING", "at TIMESTAMP(3)"]
    at = table._j_table.getResolvedSchema().getColumns().get(1).getDataType()
    assert at.getConversionClass().getName() == "java.sql.Timestamp"

    only_key = Schema.new_builder().primary_key("shout").build()
    table = agents.from_table(tickets).apply(ShoutAgent).to_table(only_key, output_type)
    assert columns(table) == ["shout STRING NOT NULL", "at TIMESTAMP(9)"]


def test_to_table_refuses_what_it_cannot_declare(tmp_path):
    agents, _, tickets = table_setup(tmp_path)

    class Untyped(BaseModel):
        anything: Any

    cases = [
        (None, "to_table needs the rows' schema"),
        (Untyped, "Untyped.anything: no SQL type for Any"),
        (DataTypes.ROW([DataTypes.FIELD("t", DataTypes.TIMESTAMP_LTZ(3))]), "t: to_table does"),
        (Types.ROW_NAMED(["t"], [Types.INSTANT()]), "t: to_table does not support"),
        (Schema.new_builder().column_by_expression("x", "1").build(), "no physical column"),
        ("route STRING", "to_table's schema must be"),
    ]
    for schema, message in cases:
        builder = agents.from_table(tickets, "customer").apply(ShoutAgent)
        with pytest.raises(FlinkAgentsError, match=re.escape(message)):
            builder.to_table(schema)


def test_to_table_after_error_stream_is_refused(tmp_path):
    agents, _, tickets = table_setup(tmp_path)
    builder = agents.from_table(tickets, "customer").apply(ShoutAgent)
    builder.error_stream()
    with pytest.raises(FlinkAgentsError, match=r"call to_table\(\) before error_stream\(\)"):
        builder.to_table(DataTypes.ROW([DataTypes.FIELD("shout", DataTypes.STRING())]))


def test_from_table_refuses_an_updating_query(tmp_path):
    agents, t_env, _ = table_setup(tmp_path)
    counts = t_env.sql_query("SELECT customer, COUNT(*) FROM tickets GROUP BY customer")
    with pytest.raises(FlinkAgentsError, match="from_table takes an insert-only table"):
        agents.from_table(counts, "customer")


def test_table_environments_that_do_not_fit_the_job_are_refused(tmp_path):
    agents, t_env, _ = table_setup(tmp_path)
    other = StreamTableEnvironment.create(StreamExecutionEnvironment.get_execution_environment())
    plain = PlainTableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    env = agents.env
    with pytest.raises(FlinkAgentsError, match="over another StreamExecutionEnvironment"):
        AgentsExecutionEnvironment.get_execution_environment(env, other)
    with pytest.raises(FlinkAgentsError, match="must be a StreamTableEnvironment"):
        agents.from_table(plain.from_elements([(1,)], ["x"]))
    second = StreamTableEnvironment.create(env)  # over the job's env, but not the one in use
    with pytest.raises(FlinkAgentsError, match="not the table environment already in use"):
        agents.from_table(second.from_elements([(1,)], ["x"]))
    with pytest.raises(FlinkAgentsError, match="takes a pyflink Table"):
        agents.from_table([{"x": 1}])
    assert agents.t_env is t_env


def test_signals_that_do_not_fit_are_refused(tmp_path):
    agents, t_env, tickets = table_setup(tmp_path)
    builder = agents.from_table(tickets, "customer")
    nudges = t_env.from_elements([("dee", "call me")], ["customer", "text"])
    with pytest.raises(FlinkAgentsError, match="a table's rows are not events: pass event_type="):
        builder.with_signals(nudges, "customer")
    with pytest.raises(FlinkAgentsError, match="with_signals takes a DataStream or a Table"):
        builder.with_signals([Nudge(text="hi")], "customer")
    with pytest.raises(FlinkAgentsError, match="event_type must be an Event class"):
        builder.with_signals(nudges, "customer", event_type=dict)
    builder.apply(NudgedReplyAgent).to_datastream()
    with pytest.raises(FlinkAgentsError, match="add signals before asking for the agent's"):
        builder.with_signals(nudges, "customer", event_type=Nudge)


def test_the_local_runner_points_to_from_list():
    local = AgentsExecutionEnvironment.get_execution_environment()
    with pytest.raises(FlinkAgentsError, match=r"from_table needs the Flink runner.*from_list"):
        local.from_table(object(), "customer")
    with pytest.raises(FlinkAgentsError, match="to_table needs the Flink runner"):
        local.from_list([{"k": 1}], "k").apply(ShoutAgent).to_table(Reply)
    with pytest.raises(FlinkAgentsError, match="t_env needs env"):
        AgentsExecutionEnvironment.get_execution_environment(None, object())


# -- Rows in, payloads out, on their own ---------------------------------------------------------


def test_a_table_row_becomes_a_dict_of_python_values():
    row = Row(id=1, meta=Row(channel="chat", tags=[Row(x=b"1")]), raw=bytearray(b"ab"), m={"k": 1})
    assert row_to_dict(row) == {
        "id": 1,
        "meta": {"channel": "chat", "tags": [{"x": b"1"}]},
        "raw": b"ab",
        "m": {"k": 1},
    }
    assert type(row_to_dict(row)["raw"]) is bytes


def fit(payload: Any, schema: Any) -> Any:
    shape = output_shape(schema, None, None)
    return tuple(payload_row(payload, shape.row, shape.model))


def misfit(payload: Any, schema: Any) -> str:
    shape = output_shape(schema, None, None)
    with pytest.raises(OutputDoesNotFit) as caught:
        payload_row(payload, shape.row, shape.model)
    return str(caught.value)


DAYS = DataTypes.ARRAY(DataTypes.ROW([DataTypes.FIELD("d", DataTypes.DATE())]))
ROW_TYPE = DataTypes.ROW(
    [
        DataTypes.FIELD("user", DataTypes.STRING().not_null()),
        DataTypes.FIELD("score", DataTypes.DOUBLE()),
        DataTypes.FIELD("code", DataTypes.VARCHAR(3)),
        DataTypes.FIELD("price", DataTypes.DECIMAL(5, 2)),
        DataTypes.FIELD("n", DataTypes.INT()),
        DataTypes.FIELD("days", DAYS),
    ]
)
GOOD = {"user": "ana", "score": 1, "code": "abc", "price": 1.005, "n": 3, "days": [{"d": None}]}


def test_payloads_that_fit_a_row_type_become_rows():
    assert fit({**GOOD, "other": "ignored"}, ROW_TYPE) == (
        "ana", 1.0, "abc", Decimal("1.01"), 3, [Row(None)]
    )  # fmt: skip
    assert fit(Row(**GOOD), ROW_TYPE)[0] == "ana"
    assert fit("hello", DataTypes.ROW([DataTypes.FIELD("reply", DataTypes.STRING())])) == ("hello",)


def test_payloads_that_do_not_fit_a_row_type_say_why():
    reasons = {
        "score": "column 'score' is DOUBLE, got str 'high'",
        "user": "column 'user' is STRING NOT NULL, got None",
        "code": "column 'code' is VARCHAR(3), got 4 chars",
        "price": "column 'price' is DECIMAL(5, 2), 1000 does not fit",
        "n": "column 'n' is INT, 4294967296 is out of range",
        "days": "column 'days[0].d' is DATE, got datetime datetime.datetime(2024, 1, 1, 0, 0)",
    }
    bad = {"score": "high", "user": None, "code": "abcd", "price": 1000, "n": 2**32,
           "days": [{"d": datetime.datetime(2024, 1, 1)}]}  # fmt: skip
    for column, reason in reasons.items():
        assert misfit({**GOOD, column: bad[column]}, ROW_TYPE) == reason
    missing = "missing columns 'score', 'code', 'price', 'n', 'days'"
    assert misfit({"user": "ana"}, ROW_TYPE) == missing
    assert misfit(True, ROW_TYPE).startswith("expected a dict, model or Row with the columns")
    assert misfit({**GOOD, "n": True}, ROW_TYPE) == "column 'n' is INT, got bool True"


def test_a_model_validates_payloads_with_pydantic_rules():
    reply = {"customer": "ana", "ticket": "7", "channel": "chat", "words": 2, "amount": None,
             "tags": ("a",), "created": None, "types": "", "extra": 1}  # fmt: skip
    assert fit(reply, Reply)[:2] == ("ana", 7)  # lax mode: "7" is 7, extra fields are ignored
    assert misfit({**reply, "words": "many"}, Reply).startswith("words: Input should be")
    assert misfit({"customer": "ana"}, Reply).startswith("ticket: Field required; channel: Field")


class Picky(BaseModel):
    name: str

    @field_validator("name")
    @classmethod
    def no_bob(cls, value: str) -> str:
        if value == "bob":
            raise TypeError("no bobs here")  # pydantic passes a TypeError on as it is
        return value


def test_the_operator_sends_what_does_not_fit_to_the_error_output():
    shape = output_shape(Picky, None, None)
    operator = OutputRows(shape.row, shape.model, shape.name)
    operator.open(None)  # where a worker imports the model
    assert list(operator.process_element("ana", None)) == [Row("ana")]
    ((tag, error),) = operator.process_element(7, None)
    assert tag is ERROR_TAG
    assert error == {
        "kind": "rejected_output",
        "reason": "output does not fit Picky: name: Input should be a valid string",
        "output": 7,
    }
    ((_, error),) = operator.process_element({"name": "bob"}, None)
    assert error["reason"] == "output could not be made a row of Picky: TypeError: no bobs here"


def test_the_shipped_operators_import_nothing_of_ours_but_the_shipping_module():
    shape = output_shape(Reply, None, None)
    operator = OutputRows(shape.row, shape.model, "Reply")
    ours = {m for m in imported_globals(cloudpickle.dumps(operator)) if m.startswith("flink_")}
    assert ours == {"flink_agents._shipping"}
    restored = cloudpickle.loads(cloudpickle.dumps(operator))
    restored.open(None)
    assert restored.model is Reply and restored.row == shape.row
    assert sql_name(shape.row).startswith("ROW<customer STRING NOT NULL, ticket BIGINT NOT NULL")
