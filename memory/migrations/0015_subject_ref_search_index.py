"""The admin's searches by a piece of a subject's reference ("cust-100" finds cust-1001), indexed.

The request queue (dsr.admin) and the records list (memory.admin) find subjects with
`memory.subjects.subject_ids_search`: `ref__icontains` (or `istartswith` for a term under three characters),
which Django writes on PostgreSQL as `UPPER("memory_subject"."ref"::text) LIKE UPPER(%s)`. A trigram GIN index
on that very expression, over the subjects a search can find (not merged), answers both (pg_trgm indexes LIKE patterns with a wildcard at either end); a B-tree
cannot answer a leading wildcard. Case is folded only for the search: references keep their case
(memory.subjects).

pg_trgm ships with PostgreSQL and is a trusted extension (13+): the database's owner, who runs migrations,
may create it without being a superuser. SQLite (the embedded default) gets no index: its LIKE scans the
subjects' table, a few thousand rows there.

Named 0015 and depending on the leaf 0012 (the chain runs 0010, 0013, 0011, 0012): another branch adds 0014
(a keyword search index); the two are independent.
"""
from django.contrib.postgres.operations import TrigramExtension
from django.db import migrations

INDEX = "subject_ref_upper_trgm_idx"


def index_create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f'CREATE INDEX IF NOT EXISTS {INDEX} ON memory_subject '
                          'USING gin ((UPPER("ref"::text)) gin_trgm_ops) WHERE merged_into_id IS NULL')


def index_drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0014_keyword_search_index"),
    ]

    operations = [
        TrigramExtension(),
        migrations.RunPython(index_create, index_drop),
    ]
