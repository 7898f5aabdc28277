"""Database expressions that read one scalar out of a JSON column, for stored generated columns.

The dashboards group a million rows by values that live inside ``retrieval_details`` (the seeds'
``JSON_EXTRACT(retrieval_details, '$.l1_top_similarity')``). Extracting JSON per row at query time
cannot use an index, so ``ToolInvocation`` keeps the few values it groups by in stored generated
columns that the database fills on every insert, whoever writes the row (the recording service, the
original service's SQL, the benchmark's bulk load), and indexes them.

The SQL guards the JSON type: a generated column that fails to compute would make the INSERT of an
invocation fail (MariaDB strict mode), and a lookup must never fail because of its own record.
A value of the wrong type (a string where a number belongs, JSON null, a missing key) becomes NULL.
"""

from __future__ import annotations

from django.db.models import CharField, Expression, F, FloatField, Func, TextField, Value


def _json_path(path: str) -> str:
    # Paths are fixed in code (model definitions), never user input; refuse anything odd anyway,
    # since they are inlined into DDL.
    if not all(c.isalnum() or c in "$._[]" for c in path) or not path.startswith("$."):
        raise ValueError(f"path: unsupported JSON path {path!r}")
    return path


class JSONNumber(Expression):
    """``column -> path`` as a float when it is a JSON number, else NULL."""

    output_field = FloatField()

    def __init__(self, column: str, path: str):
        super().__init__(output_field=FloatField())
        self.column = column
        self.path = _json_path(path)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.column!r}, {self.path!r})"

    def deconstruct(self):
        return ("observability.expressions.JSONNumber", (self.column, self.path), {})

    def __eq__(self, other):
        return isinstance(other, JSONNumber) and (self.column, self.path) == (other.column, other.path)

    def __hash__(self):
        return hash((self.__class__, self.column, self.path))

    def resolve_expression(self, *args, **kwargs):
        return self

    def as_sql(self, compiler, connection):
        raise NotImplementedError(f"JSONNumber: no SQL for {connection.vendor}")

    def as_sqlite(self, compiler, connection):
        col = connection.ops.quote_name(self.column)
        # No ", " in this SQL: Django's SQLite introspection splits CREATE TABLE on it.
        return (
            f"(CASE WHEN json_type({col},'{self.path}') IN ('real','integer') "
            f"THEN json_extract({col},'{self.path}') END)",
            [],
        )

    def as_mysql(self, compiler, connection):
        col = connection.ops.quote_name(self.column)
        value = f"JSON_EXTRACT({col}, '{self.path}')"
        return (
            f"(CASE WHEN JSON_TYPE({value}) IN ('DOUBLE', 'INTEGER', 'DECIMAL', 'UNSIGNED INTEGER') "
            f"THEN CAST({value} AS DOUBLE) END)",
            [],
        )


class JSONString(Expression):
    """``column -> path`` as text (cut to ``max_length``) when it is a JSON string, else NULL."""

    def __init__(self, column: str, path: str, max_length: int):
        super().__init__(output_field=CharField(max_length=max_length))
        self.column = column
        self.path = _json_path(path)
        self.max_length = int(max_length)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.column!r}, {self.path!r}, {self.max_length})"

    def deconstruct(self):
        return ("observability.expressions.JSONString", (self.column, self.path, self.max_length), {})

    def __eq__(self, other):
        return isinstance(other, JSONString) and (self.column, self.path, self.max_length) == (
            other.column,
            other.path,
            other.max_length,
        )

    def __hash__(self):
        return hash((self.__class__, self.column, self.path, self.max_length))

    def resolve_expression(self, *args, **kwargs):
        return self

    def as_sql(self, compiler, connection):
        raise NotImplementedError(f"JSONString: no SQL for {connection.vendor}")

    def as_sqlite(self, compiler, connection):
        col = connection.ops.quote_name(self.column)
        # No ", " in this SQL: Django's SQLite introspection splits CREATE TABLE on it.
        return (
            f"(CASE WHEN json_type({col},'{self.path}') = 'text' "
            f"THEN substr(json_extract({col},'{self.path}'),1,{self.max_length}) END)",
            [],
        )

    def as_mysql(self, compiler, connection):
        col = connection.ops.quote_name(self.column)
        value = f"JSON_EXTRACT({col}, '{self.path}')"
        return (
            f"(CASE WHEN JSON_TYPE({value}) = 'STRING' "
            f"THEN LEFT(JSON_UNQUOTE({value}), {self.max_length}) END)",
            [],
        )


class JSONValueText(Func):
    """``column -> path`` as JSON text (a string stays quoted and escaped), NULL when missing.

    For reads that group by what an agent sent (the not-found queries): unquoting in SQL would
    hand a stored lone surrogate back as bytes that are not UTF-8, and SQLite then fails the
    whole query. ``config.display.json_value_text`` turns the JSON text into text."""

    output_field = TextField()

    def __init__(self, column: str, path: str):
        super().__init__(F(column), Value(_json_path(path)))

    def as_sql(self, compiler, connection, **extra):
        return super().as_sql(compiler, connection, function="JSON_EXTRACT", **extra)

    def as_sqlite(self, compiler, connection, **extra):
        return super().as_sql(compiler, connection, template="(%(expressions)s)", arg_joiner=" -> ", **extra)
