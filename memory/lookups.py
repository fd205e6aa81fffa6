"""`field__any_of=[...]`: membership in a list of ids (or strings) as ONE bound array on PostgreSQL (`= ANY(%s)`).

`__in` spells out one placeholder per id, and building and quoting those statements cost more than the
database's own work in bulk forgets (bench/bench_forget.py, bench/bench_compaction.py). SQLite has no
arrays and keeps `IN (...)`; callers there keep batches under its variable limit.

Also the other ways of binding many values as one: `array_literal` (ids as one array) and `json_rows` (rows as
one JSON document, for `json_to_recordset`).
"""
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TypeVar

import orjson
from django.db.models import Field, ForeignObject, Lookup

T = TypeVar("T")

BIGINT_MIN, BIGINT_MAX = -2**63, 2**63 - 1


@ForeignObject.register_lookup
@Field.register_lookup
class AnyOf(Lookup):
    lookup_name = "any_of"
    prepare_rhs = False

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        if self.lhs.output_field.get_internal_type() in ("CharField", "TextField"):
            values, array_type = [str(value) for value in self.rhs], "text[]"
        else:
            # A value outside bigint matches no row (as Django's own integer lookups answer); bound, it
            # would be a DataError, so a huge id in a request would be a 500 instead of "not found".
            values = [v for v in map(int, self.rhs) if BIGINT_MIN <= v <= BIGINT_MAX]
            array_type = "bigint[]"
        if connection.vendor == "postgresql":
            if array_type == "bigint[]":
                return f"{lhs} = ANY(%s::bigint[])", [*lhs_params, array_literal(values)]
            return f"{lhs} = ANY(%s::{array_type})", [*lhs_params, values]
        if not values:
            return "1 = 0", list(lhs_params)
        return f"{lhs} IN ({', '.join(['%s'] * len(values))})", [*lhs_params, *values]


def array_literal(values) -> str:
    """A PostgreSQL array's text form (`{1,2,3}`) for ids or uuids, made in one join, to bind as one parameter
    cast to `bigint[]` / `uuid[]`: psycopg adapts a list element by element in Python (~4 µs an id, 0.4 s for
    a 100,000-record forget). Only for values whose text needs no quoting (integers, uuids)."""
    return "{" + ",".join(map(str, values)) + "}"


def json_rows(rows: list[dict]) -> str | None:
    """Rows for a statement that reads them with `json_to_recordset(%s::json)`: one JSON document made by orjson
    (one C call for a batch, and one string for psycopg to quote, where parallel arrays are quoted element by
    element). A top-level datetime goes as ISO 8601 text (PostgreSQL reads it as timestamptz). None when orjson
    refuses a value (a key that is not a str, an int past 64 bits) or would write what `json`, and so
    JSONField, refuses (a datetime or a dataclass inside a value): the caller then goes the ORM's way, which
    stores it as JSONField does, or fails as it does."""
    try:
        return orjson.dumps([{key: value.isoformat() if isinstance(value, datetime) else value
                              for key, value in row.items()} for row in rows],
                            option=orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS).decode()
    except TypeError:  # orjson.JSONEncodeError
        return None


def batches(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of at most `size` items: one statement per batch, each under the database's bound
    on parameters (`itertools.batched` arrives with Python 3.12)."""
    for start in range(0, len(items), size):
        yield items[start:start + size]


ID_DIGITS = 18  # ids up to 10**18: under bigint's 2**63 - 1


def id_prefix_q(term: str, *, field: str = "pk"):
    """Ids that start with the digits `term` ("12" finds 12, 120-129, 1200-1299 ...), as one exact match and
    one range per longer length: each is a range scan of the primary key, never a text match over the ids.
    None when `term` is not such a prefix."""
    from django.db.models import Q

    if not term.isascii() or not term.isdigit() or len(term) > ID_DIGITS or term.startswith("0"):
        return None
    n = int(term)
    match = Q(**{field: n})
    for extra in range(1, ID_DIGITS - len(term) + 1):
        scale = 10 ** extra
        match |= Q(**{f"{field}__range": (n * scale, (n + 1) * scale - 1)})
    return match
