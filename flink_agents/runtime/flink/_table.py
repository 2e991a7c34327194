"""Flink's Table API and SQL around an agent: ``from_table`` and ``to_table``.

``from_table(table, key_selector)`` converts an insert-only ``Table`` to a DataStream
(``StreamTableEnvironment.to_data_stream``) and each row to a dict of column -> value, the
record the agent sees as ``event.input``: nested rows become dicts, arrays lists, maps dicts,
``BYTES`` ``bytes``, and the other SQL types PyFlink's Python values (``DECIMAL`` a
``decimal.Decimal``, ``TIMESTAMP`` a ``datetime.datetime``, ``DATE`` a ``datetime.date``).

``to_table(schema)`` turns each ``OutputEvent`` payload into a row of a declared schema and
the outputs into a ``Table`` (``from_data_stream``). The schema is a pydantic model (the
payload's own model, usually), a row type (``DataTypes.ROW(...)`` or ``Types.ROW_NAMED``),
or a ``Schema`` (whose physical columns are the row; computed columns, metadata and
watermarks apply as Flink defines them); ``to_table(schema, output_type)`` is the form of
Apache Flink Agents, a ``Schema`` for the table and a ``RowTypeInfo`` for the rows.

A payload that does not fit goes to the builder's ``error_stream()`` as a
``rejected_output`` record (``reason``, ``output``) instead of failing the job: it is
checked in Python, column by column, before PyFlink's serializers see it (a wrong value
there fails the job, and fails it again after every restart).

The declared schema travels to the workers as plain tuples (``ColumnType``): the kind, the
nullability, then the kind's parameters.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from pyflink.common import Instant, Row, Types
from pyflink.common.typeinfo import (
    BasicArrayTypeInfo,
    DateTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    ObjectArrayTypeInfo,
    PrimitiveArrayTypeInfo,
    RowTypeInfo,
    TimestampTypeInfo,
    TimeTypeInfo,
    TypeInformation,
)
from pyflink.datastream import DataStream, ProcessFunction
from pyflink.table import DataTypes, Schema, StreamTableEnvironment, Table
from pyflink.table import types as table_types
from pyflink.util.exceptions import TableException

from flink_agents._shipping import ShippedByName, ShippedFunction, load
from flink_agents.api import FlinkAgentsError
from flink_agents.runtime.flink._dispatcher import ERROR_TAG

ColumnType = tuple[Any, ...]
"""``(kind, nullable, *parameters)``: ``("VARCHAR", True, 5)``, ``("DECIMAL", False, 10, 2)``,
``("ARRAY", True, element)``, ``("MAP", True, key, value)``, ``("ROW", True, ((name, type),
...))``; the kinds are the SQL types ``to_table`` supports."""

MAX_LENGTH = 2**31 - 1  # VARCHAR(MAX_LENGTH) is STRING, VARBINARY(MAX_LENGTH) is BYTES
_INTEGER_BITS = {"TINYINT": 8, "SMALLINT": 16, "INT": 32, "BIGINT": 64}
_TIME_KINDS = {"DATE", "TIME", "TIMESTAMP"}
# PyFlink hands Python dates and times to the JVM as java.sql values (thread mode always,
# process mode for the SQL_* type infos), so a declared column must be bridged to them.
_SQL_TIME_CLASS = {
    "DATE": "java.sql.Date",
    "TIME": "java.sql.Time",
    "TIMESTAMP": "java.sql.Timestamp",
}
_MAX_REASON = 1000


# -- From a table: rows to dicts ------------------------------------------------------------


def table_records(t_env: StreamTableEnvironment, table: Table) -> DataStream:
    """``table``'s rows as a DataStream of dicts (column -> value), pickled."""
    try:
        rows = t_env.to_data_stream(table)
    except TableException as error:
        message = str(error).split("\n", 1)[0]
        if "update changes" not in message:
            raise
        raise FlinkAgentsError(
            "from_table takes an insert-only table, and this query updates rows it already "
            "emitted (an aggregation without a window, a join that retracts...): run the agent "
            "before the aggregation, or over t_env.to_changelog_stream(...) with "
            f"from_datastream. Flink said: {message}"
        ) from None
    # The table's parallelism, so the dicts stay in the order the table emitted them.
    return (
        rows.map(ShippedFunction(row_to_dict), output_type=Types.PICKLED_BYTE_ARRAY())
        .set_parallelism(rows._j_data_stream.getParallelism())
        .name("agent-input:table-rows")
    )


def row_to_dict(row: Row) -> dict[str, Any]:
    """A table row as the agent's input: a dict of column -> value."""
    return _python_value(row)


def _python_value(value: Any) -> Any:
    """``value`` as plain Python, the same in both execution modes: thread mode hands arrays
    over as tuples and dates and times as Java objects, process mode ``TIMESTAMP_LTZ`` as
    PyFlink's ``Instant``."""
    if isinstance(value, Row):
        return {name: _python_value(v) for name, v in zip(value._fields, value, strict=True)}
    if isinstance(value, (list, tuple)):
        return [_python_value(v) for v in value]
    if isinstance(value, dict):
        return {_python_value(k): _python_value(v) for k, v in value.items()}
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, Instant):
        return _utc(value.seconds, value.nanos)
    if type(value).__module__ == "pemja":
        return _from_java(value)
    return value


def _from_java(value: Any) -> Any:
    """A Java object thread mode left as it is: the ``java.time`` values as ``datetime``s
    (``Instant``, a ``TIMESTAMP_LTZ``, in UTC), anything else as its ``toString()``."""
    kind = str(value.getClass().getName())
    if kind == "java.time.LocalDateTime":
        day, time = _from_java(value.toLocalDate()), _from_java(value.toLocalTime())
        return datetime.datetime.combine(day, time)
    if kind == "java.time.LocalDate":
        return datetime.date(value.getYear(), value.getMonthValue(), value.getDayOfMonth())
    if kind == "java.time.LocalTime":
        micros = value.getNano() // 1000
        return datetime.time(value.getHour(), value.getMinute(), value.getSecond(), micros)
    if kind == "java.time.Instant":
        return _utc(value.getEpochSecond(), value.getNano())
    return str(value.toString())


def _utc(seconds: int, nanos: int) -> datetime.datetime:
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    return epoch + datetime.timedelta(seconds=seconds, microseconds=nanos // 1000)


# -- To a table: the declared schema ----------------------------------------------------------


@dataclass(frozen=True)
class OutputShape:
    """What ``to_table`` builds: the row's column types, the rows' type in the DataStream,
    the ``Schema`` given to ``from_data_stream`` (None: derived from the type), the pydantic
    model payloads are validated with, and how reasons name the schema."""

    row: ColumnType
    type_info: TypeInformation
    schema: Schema | None
    model: type[BaseModel] | None
    name: str


def output_shape(schema: Any, output_type: Any, t_env: StreamTableEnvironment) -> OutputShape:
    """The shape of ``to_table(schema, output_type)``'s rows (see the module docstring)."""
    if output_type is not None:
        if not isinstance(output_type, RowTypeInfo):
            raise FlinkAgentsError(
                f"to_table's output_type must be a row type (Types.ROW_NAMED), got {output_type!r}"
            )
        if schema is not None and not isinstance(schema, Schema):
            raise FlinkAgentsError(
                "with output_type, to_table's schema must be a pyflink Schema (or None), got "
                f"{_name_of(schema)}"
            )
        declared = None if schema is None else _from_schema(schema, t_env)
        if declared is not None:  # else Flink derives the physical columns from output_type
            schema = _bridged_schema(schema, declared, t_env)
        row = _from_type_info(output_type, "output_type")
        return OutputShape(row, output_type, schema, None, "the table's row type")
    if schema is None:
        raise FlinkAgentsError(
            "to_table needs the rows' schema: a pydantic model (the OutputEvent payload's), a "
            "row type (DataTypes.ROW([...]) or Types.ROW_NAMED([...], [...])) or a Schema"
        )
    if inspect.isclass(schema) and issubclass(schema, BaseModel):
        row = _from_model(schema, schema.__name__, set())
        return OutputShape(row, type_info_of(row), _schema_of(row), schema, schema.__name__)
    if isinstance(schema, table_types.RowType):
        row = _from_data_type(schema, "row type")
        return OutputShape(row, type_info_of(row), _schema_of(row), None, "the table's row type")
    if isinstance(schema, RowTypeInfo):
        row = _from_type_info(schema, "row type")
        return OutputShape(row, schema, None, None, "the table's row type")
    if isinstance(schema, Schema):
        row = _from_schema(schema, t_env)
        if row is None:
            raise FlinkAgentsError(
                "to_table's Schema declares no physical column: declare the rows' columns, or "
                "pass their type as output_type (to_table(schema, Types.ROW_NAMED(...)))"
            )
        return OutputShape(
            row, type_info_of(row), _bridged_schema(schema, row, t_env), None, "the table's schema"
        )
    raise FlinkAgentsError(
        "to_table's schema must be a pydantic model class, DataTypes.ROW(...), "
        f"Types.ROW_NAMED(...) or a pyflink Schema, got {_name_of(schema)}"
    )


def output_table(
    outputs: DataStream,
    shape: OutputShape,
    t_env: StreamTableEnvironment,
    name: str,
    uid: str,
) -> tuple[Table, DataStream]:
    """The outputs as a table of ``shape``'s rows, and the ``rejected_output`` records of the
    payloads that did not fit."""
    rows = (
        outputs.process(OutputRows(shape.row, shape.model, shape.name), output_type=shape.type_info)
        .set_parallelism(outputs._j_data_stream.getParallelism())
        .name(name)
        .uid(uid)
    )
    rejected = rows.get_side_output(ERROR_TAG)
    if shape.schema is None:
        return t_env.from_data_stream(rows), rejected
    return t_env.from_data_stream(rows, shape.schema), rejected


def type_info_of(column: ColumnType) -> TypeInformation:
    """The DataStream type of a column's values."""
    kind = column[0]
    simple = {
        "CHAR": Types.STRING, "VARCHAR": Types.STRING, "BOOLEAN": Types.BOOLEAN,
        "TINYINT": Types.BYTE, "SMALLINT": Types.SHORT, "INT": Types.INT, "BIGINT": Types.LONG,
        "FLOAT": Types.FLOAT, "DOUBLE": Types.DOUBLE, "DECIMAL": Types.BIG_DEC,
        "DATE": Types.SQL_DATE, "TIME": Types.SQL_TIME, "TIMESTAMP": Types.SQL_TIMESTAMP,
    }  # fmt: skip
    if kind in simple:
        return simple[kind]()
    if kind in ("BINARY", "VARBINARY"):
        return Types.PRIMITIVE_ARRAY(Types.BYTE())
    if kind == "ARRAY":
        return Types.OBJECT_ARRAY(type_info_of(column[2]))
    if kind == "MAP":
        return Types.MAP(type_info_of(column[2]), type_info_of(column[3]))
    names = [name for name, _ in column[2]]
    return Types.ROW_NAMED(names, [type_info_of(field) for _, field in column[2]])


def data_type_of(column: ColumnType) -> table_types.DataType:
    """The SQL type of a column, its dates and times bridged to what PyFlink produces."""
    kind, nullable = column[0], column[1]
    if kind in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
        return getattr(DataTypes, kind)(column[2], nullable)
    if kind == "DECIMAL":
        return DataTypes.DECIMAL(column[2], column[3], nullable)
    if kind == "DATE":
        return DataTypes.DATE(nullable).bridged_to(_SQL_TIME_CLASS[kind])
    if kind in ("TIME", "TIMESTAMP"):
        return getattr(DataTypes, kind)(column[2], nullable).bridged_to(_SQL_TIME_CLASS[kind])
    if kind == "ARRAY":
        return DataTypes.ARRAY(data_type_of(column[2]), nullable)
    if kind == "MAP":
        return DataTypes.MAP(data_type_of(column[2]), data_type_of(column[3]), nullable)
    if kind == "ROW":
        fields = [DataTypes.FIELD(name, data_type_of(field)) for name, field in column[2]]
        return DataTypes.ROW(fields, nullable)
    return getattr(DataTypes, kind)(nullable)


def sql_name(column: ColumnType) -> str:
    """A column type as SQL writes it: ``BIGINT``, ``VARCHAR(5)``, ``ARRAY<STRING>``."""
    kind = column[0]
    if kind in ("VARCHAR", "VARBINARY") and column[2] == MAX_LENGTH:
        text = "STRING" if kind == "VARCHAR" else "BYTES"
    elif kind in ("CHAR", "VARCHAR", "BINARY", "VARBINARY", "TIME", "TIMESTAMP"):
        text = f"{kind}({column[2]})"
    elif kind == "DECIMAL":
        text = f"DECIMAL({column[2]}, {column[3]})"
    elif kind == "ARRAY":
        text = f"ARRAY<{sql_name(column[2])}>"
    elif kind == "MAP":
        text = f"MAP<{sql_name(column[2])}, {sql_name(column[3])}>"
    elif kind == "ROW":
        text = "ROW<" + ", ".join(f"{name} {sql_name(t)}" for name, t in column[2]) + ">"
    else:
        text = kind
    return text if column[1] else f"{text} NOT NULL"


def _schema_of(row: ColumnType) -> Schema:
    return Schema.new_builder().from_row_data_type(data_type_of(row)).build()


def _with_nullable(column: ColumnType, nullable: bool) -> ColumnType:
    return (column[0], nullable, *column[2:])


def _from_model(model: type[BaseModel], where: str, seen: set[type]) -> ColumnType:
    """A pydantic model's fields as a ROW: ``X | None`` fields are nullable, others NOT NULL."""
    if model in seen:
        raise FlinkAgentsError(f"{where}: {model.__name__} contains itself; a row cannot")
    fields = tuple(
        (name, _from_annotation(info.annotation, f"{where}.{name}", seen | {model}))
        for name, info in model.model_fields.items()
    )
    return ("ROW", True, fields)


def _from_annotation(annotation: Any, where: str, seen: set[type]) -> ColumnType:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _from_annotation(args[0], where, seen)
    if origin in (typing.Union, types.UnionType):
        others = [a for a in args if a is not type(None)]
        if len(others) == 1 and len(others) < len(args):
            return _with_nullable(_from_annotation(others[0], where, seen), True)
    elif origin is typing.Literal:
        return _of_values(args, annotation, where)
    elif (origin in (list, set, frozenset) and len(args) == 1) or (
        origin is tuple and len(args) == 2 and args[1] is Ellipsis
    ):
        return ("ARRAY", False, _from_annotation(args[0], f"{where}[]", seen))
    elif origin in (dict, Mapping) and len(args) == 2:
        key = _from_annotation(args[0], f"{where} (key)", seen)
        return ("MAP", False, key, _from_annotation(args[1], f"{where}[]", seen))
    elif origin is None and inspect.isclass(annotation):
        column = _from_class(annotation, where, seen)
        if column is not None:
            return column
    raise FlinkAgentsError(
        f"{where}: no SQL type for {_name_of(annotation)}; to_table maps str, int, float, bool, "
        "Decimal, datetime, date, time, bytes, enums and Literals of those, list[X], dict[K, V], "
        "X | None and nested models (or pass a row type or Schema instead of the model)"
    )


def _from_class(cls: type, where: str, seen: set[type]) -> ColumnType | None:
    if issubclass(cls, BaseModel):
        return _with_nullable(_from_model(cls, where, seen), False)
    if issubclass(cls, enum.Enum):
        return _of_values(tuple(member.value for member in cls), cls, where)
    simple: list[tuple[type, ColumnType]] = [
        (bool, ("BOOLEAN", False)),  # before int: bool is an int
        (int, ("BIGINT", False)),
        (float, ("DOUBLE", False)),
        (str, ("VARCHAR", False, MAX_LENGTH)),
        (decimal.Decimal, ("DECIMAL", False, 38, 18)),
        # Before date (a datetime is a date); milliseconds, what PyFlink's DataStream keeps.
        (datetime.datetime, ("TIMESTAMP", False, 3)),
        (datetime.date, ("DATE", False)),
        (datetime.time, ("TIME", False, 0)),
        (bytes, ("VARBINARY", False, MAX_LENGTH)),
    ]
    return next((column for base, column in simple if issubclass(cls, base)), None)


def _of_values(values: tuple[Any, ...], annotation: Any, where: str) -> ColumnType:
    """The type of a Literal's or an enum's values: all str, all bool or all int."""
    for base, column in _VALUE_COLUMNS:
        if values and all(type(v) is base for v in values):
            return column
    raise FlinkAgentsError(
        f"{where}: no SQL type for {_name_of(annotation)}: its values must be all str, all "
        "int or all bool"
    )


_VALUE_COLUMNS: tuple[tuple[type, ColumnType], ...] = (
    (bool, ("BOOLEAN", False)),
    (int, ("BIGINT", False)),
    (str, ("VARCHAR", False, MAX_LENGTH)),
)
_PLAIN_KINDS = {
    table_types.BooleanType: "BOOLEAN", table_types.TinyIntType: "TINYINT",
    table_types.SmallIntType: "SMALLINT", table_types.IntType: "INT",
    table_types.BigIntType: "BIGINT", table_types.FloatType: "FLOAT",
    table_types.DoubleType: "DOUBLE", table_types.DateType: "DATE",
}  # fmt: skip
_SIZED_KINDS = {
    table_types.CharType: "CHAR", table_types.VarCharType: "VARCHAR",
    table_types.BinaryType: "BINARY", table_types.VarBinaryType: "VARBINARY",
}  # fmt: skip


def _from_data_type(data_type: Any, where: str) -> ColumnType:
    """A pyflink ``DataType`` as a column type (a ``RowType`` at the top)."""
    t, n = table_types, data_type._nullable
    kind = _PLAIN_KINDS.get(type(data_type))
    if kind is not None:
        return (kind, n)
    kind = _SIZED_KINDS.get(type(data_type))
    if kind is not None:
        return (kind, n, data_type.length)
    if isinstance(data_type, t.DecimalType):
        return ("DECIMAL", n, data_type.precision, data_type.scale)
    if isinstance(data_type, t.TimeType):
        return ("TIME", n, data_type.precision)
    if isinstance(data_type, t.TimestampType):
        return ("TIMESTAMP", n, data_type.precision)
    if isinstance(data_type, t.ArrayType):
        return ("ARRAY", n, _from_data_type(data_type.element_type, f"{where}[]"))
    if isinstance(data_type, t.MapType):
        key = _from_data_type(data_type.key_type, f"{where} (key)")
        return ("MAP", n, key, _from_data_type(data_type.value_type, f"{where}[]"))
    if isinstance(data_type, t.RowType):
        fields = tuple(
            (f.name, _from_data_type(f.data_type, f"{where}.{f.name}")) for f in data_type.fields
        )
        return ("ROW", n, fields)
    raise FlinkAgentsError(
        f"{where}: to_table does not support {data_type} columns (TIMESTAMP_LTZ, intervals, "
        "MULTISET, RAW...): declare TIMESTAMP for times, STRING or a ROW for the rest"
    )


def _from_type_info(type_info: TypeInformation, where: str) -> ColumnType:
    """A DataStream type as a column type (nullable: a DataStream type does not say)."""
    simple = {
        "STRING": ("VARCHAR", True, MAX_LENGTH), "BOOLEAN": ("BOOLEAN", True),
        "BYTE": ("TINYINT", True), "SHORT": ("SMALLINT", True), "INT": ("INT", True),
        "LONG": ("BIGINT", True), "FLOAT": ("FLOAT", True), "DOUBLE": ("DOUBLE", True),
        "BIG_DEC": ("DECIMAL", True, 38, 18),
    }  # fmt: skip
    for name, column in simple.items():
        if type_info == getattr(Types, name)():
            return column
    if isinstance(type_info, DateTypeInfo):
        return ("DATE", True)
    if isinstance(type_info, TimeTypeInfo):
        return ("TIME", True, 0)
    if isinstance(type_info, TimestampTypeInfo):
        return ("TIMESTAMP", True, 9)
    if isinstance(type_info, PrimitiveArrayTypeInfo) and type_info._element_type == Types.BYTE():
        return ("VARBINARY", True, MAX_LENGTH)
    if isinstance(type_info, (BasicArrayTypeInfo, ObjectArrayTypeInfo)):
        return ("ARRAY", True, _from_type_info(type_info._element_type, f"{where}[]"))
    if isinstance(type_info, ListTypeInfo):
        return ("ARRAY", True, _from_type_info(type_info.elem_type, f"{where}[]"))
    if isinstance(type_info, MapTypeInfo):
        key = _from_type_info(type_info._key_type_info, f"{where} (key)")
        return ("MAP", True, key, _from_type_info(type_info._value_type_info, f"{where}[]"))
    if isinstance(type_info, RowTypeInfo):
        fields = tuple(
            (name, _from_type_info(field, f"{where}.{name}"))
            for name, field in zip(
                type_info.get_field_names(), type_info.get_field_types(), strict=True
            )
        )
        return ("ROW", True, fields)
    raise FlinkAgentsError(
        f"{where}: to_table does not support {type_info!r} values (Types.INSTANT, LOCAL_* "
        "times, pickled bytes, tuples...): use Types.SQL_TIMESTAMP, Types.STRING or a row"
    )


def _from_schema(schema: Schema, t_env: StreamTableEnvironment) -> ColumnType | None:
    """The row of a ``Schema``'s physical columns, their types resolved by ``t_env`` (None:
    it declares none)."""
    factory = t_env._j_tenv.getCatalogManager().getDataTypeFactory()
    fields = []
    for column in schema._j_schema.getColumns():
        if column.getClass().getSimpleName() == "UnresolvedPhysicalColumn":
            name = column.getName()
            data_type = factory.createDataType(column.getDataType())
            fields.append(
                (name, _from_data_type(table_types._from_java_data_type(data_type), name))
            )
    return ("ROW", True, tuple(fields)) if fields else None


def _bridged_schema(schema: Schema, row: ColumnType, t_env: StreamTableEnvironment) -> Schema:
    """``schema``, its physical date and time columns bridged to the java.sql values PyFlink
    produces (else Flink fails the job converting the first row). The computed and metadata
    columns, the watermarks and the primary key are kept."""
    if not _has_time(row):
        return schema
    from pyflink.java_gateway import get_gateway

    types_by_name = dict(row[2])
    builder = get_gateway().jvm.org.apache.flink.table.api.Schema.newBuilder()
    for column in schema._j_schema.getColumns():
        kind, name = column.getClass().getSimpleName(), column.getName()
        if kind == "UnresolvedPhysicalColumn":
            builder.column(name, table_types._to_java_data_type(data_type_of(types_by_name[name])))
        elif kind == "UnresolvedComputedColumn":
            builder.columnByExpression(name, column.getExpression())
        else:
            builder.columnByMetadata(
                name, column.getDataType(), column.getMetadataKey(), column.isVirtual()
            )
        if column.getComment().isPresent():
            builder.withComment(column.getComment().get())
    for watermark in schema._j_schema.getWatermarkSpecs():
        builder.watermark(watermark.getColumnName(), watermark.getWatermarkExpression())
    key = schema._j_schema.getPrimaryKey()
    if key.isPresent():
        builder.primaryKeyNamed(key.get().getConstraintName(), key.get().getColumnNames())
    return Schema(builder.build())


def _has_time(column: ColumnType) -> bool:
    kind = column[0]
    if kind in _TIME_KINDS:
        return True
    if kind == "ARRAY":
        return _has_time(column[2])
    if kind == "MAP":
        return _has_time(column[2]) or _has_time(column[3])
    if kind == "ROW":
        return any(_has_time(field) for _, field in column[2])
    return False


def _name_of(value: Any) -> str:
    if inspect.isclass(value):
        return value.__name__
    return repr(value) if typing.get_origin(value) else type(value).__name__


# -- To a table: payloads to rows, on the workers ---------------------------------------------


def rejected_output(reason: str, output: Any) -> dict[str, Any]:
    """The error record of an output that does not fit the table's schema."""
    return {"kind": "rejected_output", "reason": reason, "output": output}


class OutputDoesNotFit(ValueError):
    """An output that does not fit the table's schema; the message is the reason."""


class OutputRows(ShippedByName, ProcessFunction):
    """Each ``OutputEvent`` payload as a row of the declared schema, or, when it does not
    fit, a ``rejected_output`` error record to the ``agent-errors`` side output.

    A model the workers can import travels by name and is imported under the shipping lock
    in ``open`` (like the plan's code); one defined in a script's ``__main__`` or in a
    function travels by value."""

    def __init__(self, row: ColumnType, model: type[BaseModel] | None, name: str) -> None:
        self.row = row
        self.name = name
        self.model_ref: tuple[str, str] | None = None
        self.model: type[BaseModel] | None = None
        if model is not None and model.__module__ != "__main__" and "<" not in model.__qualname__:
            self.model_ref = (model.__module__, model.__qualname__)
        else:
            self.model = model

    def open(self, runtime_context: Any) -> None:
        if self.model_ref is not None:
            self.model = load(*self.model_ref)

    def process_element(self, payload: Any, ctx: ProcessFunction.Context) -> Any:
        try:
            yield payload_row(payload, self.row, self.model)
        except OutputDoesNotFit as error:
            reason = f"output does not fit {self.name}: {error}"
            yield ERROR_TAG, rejected_output(reason[:_MAX_REASON], payload)
        except Exception as error:  # a model's validator that raised something else
            reason = f"output could not be made a row of {self.name}: {type(error).__name__}: "
            yield ERROR_TAG, rejected_output(f"{reason}{error}"[:_MAX_REASON], payload)


def payload_row(payload: Any, row: ColumnType, model: type[BaseModel] | None = None) -> Row:
    """``payload`` (a model, a dict, a named Row, a dataclass; for a one-column row, the
    column's value itself) as a row of ``row``'s columns.

    Raises:
        OutputDoesNotFit: a column is missing, or a value is not of its column's type.
    """
    fields = row[2]
    if model is not None and isinstance(payload, model):
        return _row(payload.model_dump(), fields, "")
    values = _as_mapping(payload)
    if values is None and len(fields) == 1:
        values = {fields[0][0]: payload}
    if model is not None:
        try:
            values = model.model_validate(payload if values is None else values).model_dump()
        except ValidationError as error:
            raise OutputDoesNotFit(_pydantic_reason(error)) from None
    elif values is None:
        columns = ", ".join(name for name, _ in fields)
        raise OutputDoesNotFit(
            f"expected a dict, model or Row with the columns ({columns}), got "
            f"{type(payload).__name__} {payload!r:.100}"
        )
    return _row(values, fields, "")


def _as_mapping(value: Any) -> dict[str, Any] | None:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, BaseModel):
        return value.model_dump()
    if isinstance(value, Row) and hasattr(value, "_fields"):
        return value.as_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return None


def _row(values: Mapping[str, Any], fields: tuple[tuple[str, ColumnType], ...], path: str) -> Row:
    missing = [name for name, _ in fields if name not in values]
    if missing:
        names = ", ".join(repr(f"{path}{name}") for name in missing)
        raise OutputDoesNotFit(f"missing column{'s' if len(missing) > 1 else ''} {names}")
    return Row(*(_value(column, values[name], f"{path}{name}") for name, column in fields))


def _value(column: ColumnType, value: Any, path: str) -> Any:
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None:
        if column[1]:
            return None
        raise OutputDoesNotFit(f"column {path!r} is {sql_name(column)}, got None")
    converted = _CONVERT[column[0]](column, value, path)
    if converted is _MISMATCH:
        raise OutputDoesNotFit(
            f"column {path!r} is {sql_name(column)}, got {type(value).__name__} {value!r:.100}"
        )
    return converted


_MISMATCH = object()


def _text(column: ColumnType, value: Any, path: str) -> Any:
    if not isinstance(value, str):
        return _MISMATCH
    if len(value) > column[2]:
        raise OutputDoesNotFit(f"column {path!r} is {sql_name(column)}, got {len(value)} chars")
    return value


def _binary(column: ColumnType, value: Any, path: str) -> Any:
    if not isinstance(value, (bytes, bytearray)):
        return _MISMATCH
    if len(value) > column[2]:
        raise OutputDoesNotFit(f"column {path!r} is {sql_name(column)}, got {len(value)} bytes")
    return bytes(value)


def _boolean(column: ColumnType, value: Any, path: str) -> Any:
    return value if isinstance(value, bool) else _MISMATCH


def _integer(column: ColumnType, value: Any, path: str) -> Any:
    if not isinstance(value, int) or isinstance(value, bool):
        return _MISMATCH
    bits = _INTEGER_BITS[column[0]]
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise OutputDoesNotFit(f"column {path!r} is {sql_name(column)}, {value} is out of range")
    return value


def _floating(column: ColumnType, value: Any, path: str) -> Any:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return _MISMATCH
    return float(value)


def _decimal(column: ColumnType, value: Any, path: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float, decimal.Decimal)):
        return _MISMATCH
    number = decimal.Decimal(str(value) if isinstance(value, float) else value)
    precision, scale = column[2], column[3]
    if not number.is_finite():
        raise OutputDoesNotFit(f"column {path!r} is {sql_name(column)}, got {value}")
    rounded = number.quantize(decimal.Decimal(1).scaleb(-scale), decimal.ROUND_HALF_UP)
    if rounded and len(rounded.as_tuple().digits) > precision:
        raise OutputDoesNotFit(f"column {path!r} is {sql_name(column)}, {value} does not fit")
    return rounded


def _date(column: ColumnType, value: Any, path: str) -> Any:
    exact = isinstance(value, datetime.date) and not isinstance(value, datetime.datetime)
    return value if exact else _MISMATCH


def _time(column: ColumnType, value: Any, path: str) -> Any:
    return value if isinstance(value, datetime.time) else _MISMATCH


def _timestamp(column: ColumnType, value: Any, path: str) -> Any:
    if not isinstance(value, datetime.datetime):
        return _MISMATCH
    if value.tzinfo is not None:  # TIMESTAMP has no zone: an aware time is taken in UTC
        value = value.astimezone(datetime.UTC).replace(tzinfo=None)
    return value


def _array(column: ColumnType, value: Any, path: str) -> Any:
    if not isinstance(value, (list, tuple, set, frozenset)):
        return _MISMATCH
    return [_value(column[2], item, f"{path}[{i}]") for i, item in enumerate(value)]


def _map(column: ColumnType, value: Any, path: str) -> Any:
    if not isinstance(value, Mapping):
        return _MISMATCH
    return {
        _value(column[2], k, f"{path} (key)"): _value(column[3], v, f"{path}[{k!r}]")
        for k, v in value.items()
    }


def _nested_row(column: ColumnType, value: Any, path: str) -> Any:
    values = _as_mapping(value)
    if values is None:
        return _MISMATCH
    return _row(values, column[2], f"{path}.")


_CONVERT: dict[str, Callable[[ColumnType, Any, str], Any]] = {
    "CHAR": _text, "VARCHAR": _text, "BINARY": _binary, "VARBINARY": _binary,
    "BOOLEAN": _boolean, "TINYINT": _integer, "SMALLINT": _integer, "INT": _integer,
    "BIGINT": _integer, "FLOAT": _floating, "DOUBLE": _floating, "DECIMAL": _decimal,
    "DATE": _date, "TIME": _time, "TIMESTAMP": _timestamp, "ARRAY": _array, "MAP": _map,
    "ROW": _nested_row,
}  # fmt: skip


def _pydantic_reason(error: ValidationError) -> str:
    parts = []
    for problem in error.errors():
        where = ".".join(str(part) for part in problem["loc"])
        parts.append(f"{where}: {problem['msg']}" if where else problem["msg"])
    return "; ".join(parts)
