"""The keyword search's index (issue 20): words and prefixes of the readable records' content.

PostgreSQL: `memory_record.content_search`, a stored generated tsvector of the content with the `simple`
configuration (lower-cased words, no stemming, no stop words: memory content is in any language, and a
language's stemmer would mangle the others' words and drop their short words as stop words), NULL while the
record is not readable (hidden, i.e. forgotten_at set, or redacted), and a GIN index over the readable rows
only. So a forget takes the record's words out of the index in its own UPDATE: the database recomputes the
column with the row, and the new row version is outside the partial index (the old version's entries are
dead tuples until VACUUM, invisible to every query). The column is not part of Django's model: nothing reads
it but the search (`memory.selectors`), and no write can set it (a generated column takes no value; the
application role gets no UPDATE on it, `memory.dbroles`). The guard triggers (0003, 0013, 0012) test only
the columns they name; a BEFORE trigger never sees a generated column, and the column follows a redaction
the guard accepts (content emptied, redacted_at set: the column becomes NULL).

On a store that has records already, the column is added in a transaction of its own: its table rewrite holds
`memory_record`'s exclusive lock (18 s at 1,000,000 records on these 2 cores). The GIN index is then built
CONCURRENTLY (~20 s there): the records are read and written meanwhile, and a keyword search scans the column
until the index is ready (slower, not wrong). A build cut short (cancelled, the server stopped) leaves an invalid
index, which no query uses: running the migration again drops it and builds it anew; the column's step can run
again too (`_concurrently`).

SQLite (the embedded default): `memory_record_search`, an FTS5 table that stores no copy of the content
(`content=''`: the index only), `unicode61` tokens without removing diacritics (as `simple` keeps them), kept
in step with the readable records by triggers: a record enters it when written readable, and leaves it in the
statement that hides, redacts or deletes it.
"""
from django.db import migrations, transaction

from memory.migrations import _concurrently as concurrently

COLUMN = "content_search"
INDEX = "memory_record_content_search_idx"
READABLE = "forgotten_at IS NULL AND redacted_at IS NULL"

PG_COLUMN = (f"ALTER TABLE memory_record ADD COLUMN IF NOT EXISTS {COLUMN} tsvector GENERATED ALWAYS AS "
             f"(CASE WHEN {READABLE} THEN to_tsvector('simple'::regconfig, content) END) STORED")
PG_INDEX = f"CREATE INDEX CONCURRENTLY {INDEX} ON memory_record USING gin ({COLUMN}) WHERE {READABLE}"
PG_REVERSE = [
    f"DROP INDEX IF EXISTS {INDEX}",
    f"ALTER TABLE memory_record DROP COLUMN IF EXISTS {COLUMN}",
]

FTS = "memory_record_search"


def _readable(row: str) -> str:
    return f"{row}.forgotten_at IS NULL AND {row}.redacted_at IS NULL"


SQLITE_FORWARD = [
    f"CREATE VIRTUAL TABLE {FTS} USING fts5(content, content='', tokenize='unicode61 remove_diacritics 0')",
    f"INSERT INTO {FTS} (rowid, content) SELECT id, content FROM memory_record WHERE {READABLE}",
    f"""CREATE TRIGGER {FTS}_insert AFTER INSERT ON memory_record WHEN {_readable('NEW')}
BEGIN
    INSERT INTO {FTS} (rowid, content) VALUES (NEW.id, NEW.content);
END""",
    # A contentless table forgets an entry given the words it was indexed with: the row's old content.
    f"""CREATE TRIGGER {FTS}_delete AFTER DELETE ON memory_record WHEN {_readable('OLD')}
BEGIN
    INSERT INTO {FTS} ({FTS}, rowid, content) VALUES ('delete', OLD.id, OLD.content);
END""",
    f"""CREATE TRIGGER {FTS}_update AFTER UPDATE OF id, content, forgotten_at, redacted_at ON memory_record
WHEN {_readable('OLD')} OR {_readable('NEW')}
BEGIN
    INSERT INTO {FTS} ({FTS}, rowid, content) SELECT 'delete', OLD.id, OLD.content WHERE {_readable('OLD')};
    INSERT INTO {FTS} (rowid, content) SELECT NEW.id, NEW.content WHERE {_readable('NEW')};
END""",
]
SQLITE_REVERSE = [
    f"DROP TRIGGER IF EXISTS {FTS}_insert",
    f"DROP TRIGGER IF EXISTS {FTS}_delete",
    f"DROP TRIGGER IF EXISTS {FTS}_update",
    f"DROP TABLE IF EXISTS {FTS}",
]


def _run(schema_editor, statements: list[str]) -> None:
    """`statements` in one transaction: the migration is not atomic (CREATE INDEX CONCURRENTLY)."""
    with transaction.atomic(using=schema_editor.connection.alias):
        for statement in statements:
            schema_editor.execute(statement, params=None)


def index_valid(connection) -> bool | None:
    """Whether the GIN index is valid (False: left invalid by a build cut short), None when there is none."""
    return concurrently.index_valid(connection, INDEX)


def index_build(schema_editor) -> None:
    concurrently.index_build(schema_editor, INDEX, PG_INDEX)


def forward(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        _run(schema_editor, [PG_COLUMN])
        index_build(schema_editor)
    elif vendor == "sqlite":
        _run(schema_editor, SQLITE_FORWARD)
    else:
        raise RuntimeError(f"the keyword index exists for PostgreSQL and SQLite only, not {vendor}")


def backward(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        _run(schema_editor, PG_REVERSE)
    elif vendor == "sqlite":
        _run(schema_editor, SQLITE_REVERSE)


class Migration(migrations.Migration):

    # CREATE INDEX CONCURRENTLY cannot run in a transaction; the other statements have one of their own (_run).
    atomic = False

    # 0012 is the latest of the chain 0010 -> 0013 -> 0011 -> 0012 (so this follows 0013 too).
    dependencies = [
        ("memory", "0012_tsprivacy_salt_with_content_fleet_ack"),
    ]

    operations = [migrations.RunPython(forward, backward)]
