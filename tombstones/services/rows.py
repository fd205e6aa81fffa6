"""Set-based writes for the issuing path, without model instances or compiled SQL.

A `RowWrites` collects inserts (rows as tuples of column values in `columns` order: attnames, `tenant_id`
not `tenant`) and raw statements, and `send()` writes them in as few round trips as the backend allows:

- PostgreSQL: every insert of at most `INSERT_MAX_ROWS` rows and every raw statement go together as one
  multi-statement query (Django's cursor binds parameters on the client, so psycopg sends the whole text
  as one simple query: one round trip for a single tombstone's nodes, head, tombstone and salts; with the
  `server_side_binding` option, one query per command). Larger inserts (more rows, or `COPY_MIN_BYTES`)
  go by binary COPY (~10× cheaper per row than `bulk_create`, no text to parse on the server; two round
  trips each). A COPY consumes its
  rows as they come, so rows given as an iterator are produced while the server inserts the ones before.
- Elsewhere (SQLite, the embedded default: no round trips to save) `bulk_create` and one `execute` each.

COPY goes through the driver's cursor, so Django's query capture does not list it.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

import orjson
import psycopg
from django.db import connection
from psycopg.adapt import PyFormat
from psycopg.copy import LibpqWriter
from psycopg.types.json import Jsonb

INSERT_MAX_ROWS = 20  # above this, COPY's cheaper rows outweigh its extra round trips
# Rows this large go by binary COPY even when few: quoting a bytea or JSON value into the query text and
# parsing it back on the server cost ~1 s for the 10 MB statement of a 100,000-record forget.
COPY_MIN_BYTES = 256 * 1024

# jsonb's binary input is a version byte (1) and the JSON text. A binary COPY sends each value as length and
# bytes, whatever type psycopg was told: jsonb values go as bytes made here by orjson (~2 µs a row less than
# psycopg's Jsonb dumper and `json.dumps`), and psycopg is told `bytea` for those columns, so it sends them as
# they are; the server reads them with jsonb's own input function.
JSONB_BINARY_VERSION = b"\x01"

# PostgreSQL's binary COPY framing: a header (signature, flags, extension length), then rows (a 16-bit field
# count, and each field as a 32-bit length and its bytes), then a trailer. Callers that know their columns
# encode their rows themselves (`RowWrites.insert(encode=...)`, one struct per row), and such rows go to the
# server in chunks of this size: psycopg's own row buffer holds 32 KB before sending, ~600 small rows (a log
# node's 56 bytes), which the server then stores only when the COPY ends, while this process waits; here the
# server stores each chunk as it comes, and the caller's `then` (the issuer signs there) runs once the last
# one is sent, while the server finishes.
COPY_BINARY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
COPY_BINARY_TRAILER = b"\xff\xff"
COPY_CHUNK_BYTES = 8192

_copy_types: dict[tuple, tuple[list[str], list[int]]] = {}
_BYTES_BINARY_DUMPER = psycopg.adapters.get_dumper(bytes, PyFormat.BINARY)


class RowWrites:
    def __init__(self) -> None:
        self._inserts: list[tuple] = []  # (model, columns, rows, by_copy, encode, then)
        self._statements: list[tuple[str, list]] = []

    def insert(self, *, model, columns: list[str], rows: Iterable[tuple], count: int | None = None,
               size: int = 0, encode: Callable[[tuple], bytes] | None = None,
               then: Callable[[], None] | None = None) -> None:
        """Queue rows for `model`; `count` is required when `rows` is an iterator rather than a list.
        `size`: the rows' approximate bytes, when the caller knows them (`COPY_MIN_BYTES`).
        `encode`: a row's binary COPY bytes (field count, then each field's length and bytes), used when the
        rows go by COPY (see `COPY_CHUNK_BYTES`). `then` runs once the rows are handed over: by COPY, after the
        last chunk is sent and before the COPY ends; otherwise before the query that holds them. Not at all when
        there are no rows."""
        count = len(rows) if count is None else count
        if count:
            self._inserts.append((model, columns, rows, count > INSERT_MAX_ROWS or size >= COPY_MIN_BYTES,
                                  encode, then))

    def execute(self, sql: str, params: list) -> None:
        """Queue one raw statement (`%s` placeholders, no trailing semicolon), sent after the inserts."""
        self._statements.append((sql, params))

    def send(self) -> None:
        inserts, statements = self._inserts, self._statements
        self._inserts, self._statements = [], []
        if connection.vendor != "postgresql":
            for model, columns, rows, _by_copy, _encode, then in inserts:
                model.objects.bulk_create([model(**dict(zip(columns, row))) for row in rows], batch_size=500)
                if then:
                    then()
            with connection.cursor() as cursor:
                for sql, params in statements:
                    cursor.execute(sql, params)
            return
        parts, params = [], []
        for model, columns, rows, by_copy, encode, then in inserts:
            if by_copy:
                _copy(model, columns, rows, encode, then)
                continue
            rows = list(rows)
            if then:
                then()
            values = "(" + ", ".join(["%s"] * len(columns)) + ")"
            parts.append(f"INSERT INTO {model._meta.db_table} ({_names(model, columns)}) VALUES "
                         + ", ".join([values] * len(rows)))
            params.extend(Jsonb(value) if isinstance(value, dict) else value for row in rows for value in row)
        for sql, statement_params in statements:
            parts.append(sql)
            params.extend(statement_params)
        if not parts:
            return
        with connection.cursor() as cursor:
            if not connection.settings_dict.get("OPTIONS", {}).get("server_side_binding"):
                cursor.execute(";\n".join(parts), params)
                return
            for part in parts:  # a server-side prepared statement holds one command: one round trip each
                count = part.count("%s")
                cursor.execute(part, params[:count])
                params = params[count:]


def _names(model, columns: list[str]) -> str:
    return ", ".join(connection.ops.quote_name(model._meta.get_field(c).column) for c in columns)


def _types(model, columns: list[str]) -> tuple[list[str], list[int]]:
    """The columns' PostgreSQL type names for a binary COPY (`varchar(100)` -> `varchar`; jsonb as `bytea`,
    see `JSONB_BINARY_VERSION`), and the positions of the jsonb columns."""
    cache_key = (model, tuple(columns))
    if cache_key not in _copy_types:
        names = [model._meta.get_field(c).db_type(connection).split("(")[0] for c in columns]
        jsonb = [index for index, name in enumerate(names) if name == "jsonb"]
        _copy_types[cache_key] = ([("bytea" if name == "jsonb" else name) for name in names], jsonb)
    return _copy_types[cache_key]


def _jsonb_encoded(rows: Iterable[tuple], positions: list[int]) -> Iterable[tuple]:
    dumps, version = orjson.dumps, JSONB_BINARY_VERSION
    for row in rows:
        row = list(row)
        for index in positions:
            if row[index] is not None:
                row[index] = version + dumps(row[index])
        yield row


def _copy(model, columns: list[str], rows: Iterable[tuple], encode: Callable[[tuple], bytes] | None = None,
          then: Callable[[], None] | None = None) -> None:
    sql = f"COPY {model._meta.db_table} ({_names(model, columns)}) FROM STDIN (FORMAT BINARY)"
    with connection.wrap_database_errors, connection.cursor() as cursor:  # driver errors surface as Django's
        raw = cursor.cursor  # (IntegrityError on a duplicate id)
        if encode is not None:
            writer = LibpqWriter(raw)
            with raw.copy(sql, writer=writer) as copy:
                _copy_encoded(copy, writer, rows, encode)
                if then:
                    then()
            return
        types, jsonb = _types(model, columns)
        if jsonb:
            rows = _jsonb_encoded(rows, jsonb)
        # `set_types` picks dumpers by type oid, and for bytea that is psycopg's Python `dbapi20` dumper (~0.2 µs
        # a value more than the C one it uses for `bytes` by class): this cursor gets the C one for bytea.
        raw.adapters.register_dumper(bytes, _BYTES_BINARY_DUMPER)
        with raw.copy(sql) as copy:
            copy.set_types(types)
            for row in rows:
                copy.write_row(row)
            if then:
                then()


def _copy_encoded(copy, writer: LibpqWriter, rows: Iterable[tuple], encode: Callable[[tuple], bytes]) -> None:
    """Each chunk goes to libpq as soon as it is full, which sends what the socket takes without waiting (a
    server that falls behind does not stop this process); the last one is flushed whole, waiting if need be,
    so that the server has every row before the caller's `then`."""
    chunk = bytearray(COPY_BINARY_HEADER)
    for row in rows:
        chunk += encode(row)
        if len(chunk) >= COPY_CHUNK_BYTES:
            copy.write(chunk)
            chunk = bytearray()
    writer.flush_threshold = 0  # LibpqWriter flushes a write once this many bytes are unflushed
    copy.write(chunk + COPY_BINARY_TRAILER)

