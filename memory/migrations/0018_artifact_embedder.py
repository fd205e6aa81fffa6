"""Which embedder made each vector: `memory_derivedartifact.embedder`, the embedder's identity
(memory.embedding.identity_of), so that the similarity search compares a query only with vectors of the embedder
that made the query's, and `manage.py reembed` knows which to make again after LEDGER_EMBEDDER changes.

The vectors written before this migration are identified by making some of them again: the 20 oldest and the 20
newest live embeddings, each from its own text (its content, else its sources' contents, as the service embedded
it), by the configured embedder and then by `HashingEmbedder` (the default embedder before `WordLlamaEmbedder`).
The first whose vectors are all the same as the stored ones is recorded as their maker; where none is (a store that
changed embedder once, sources edited since), they are recorded as unknown (''), and the migration warns: the
similarity search skips them until `manage.py reembed` has made them again. It warns too when their maker is
not the configured embedder (a store from before WordLlamaEmbedder became the default).

On PostgreSQL the identity is the new column's DEFAULT when it is added, which PostgreSQL keeps in the catalog
without writing a row (an UPDATE would write each row anew and, where its page has no room for the new version,
into every index, the HNSW graph too: up to ~15 ms a row at 50,000 embeddings, hours at 1,000,000,
bench/bench_reembed.py); the default is then set to '' for rows written afterwards. Rows of the other kinds thus
read the identity too, which means nothing where there is no vector. SQLite (the embedded default, small): the
column is added with '' and the embeddings' rows are updated.
"""
import warnings

import numpy as np
from django.conf import settings
from django.db import migrations, models
from django.utils.module_loading import import_string

SAMPLE = 20
FORMER_DEFAULT = "memory.embedding.HashingEmbedder"
LIVE = "kind = 'embedding' AND vector IS NOT NULL AND forgotten_at IS NULL AND redacted_at IS NULL"


def _sample(cursor) -> list[tuple[str, bytes]]:
    """(text, stored vector) of the oldest and newest live embeddings."""
    rows = []
    for order in ("ASC", "DESC"):
        cursor.execute(f"SELECT id, content, vector FROM memory_derivedartifact WHERE {LIVE} ORDER BY id {order} "
                       f"LIMIT {SAMPLE}")
        rows += cursor.fetchall()
    sampled = []
    for pk, content, vector in {row[0]: row for row in rows}.values():
        if not content:
            cursor.execute("SELECT r.content FROM memory_lineage l JOIN memory_record r ON r.id = l.source_id "
                           "WHERE l.artifact_id = %s ORDER BY r.id", [pk])
            content = "\n".join(text for (text,) in cursor.fetchall())
        sampled.append((content, bytes(vector)))
    return sampled


def _maker(sampled: list[tuple[str, bytes]]) -> tuple[str, str | None]:
    """The identity and dotted path of the embedder that makes every sampled vector again; ('', None) when none
    does."""
    from memory.embedding import identity_of

    for path in dict.fromkeys([settings.LEDGER_EMBEDDER, FORMER_DEFAULT]):
        try:
            model = import_string(path)()
        except Exception:  # noqa: BLE001 - an embedder that cannot load here made nothing we can check
            continue
        made = np.asarray(model.embed([text for text, _ in sampled]), dtype="<f4")
        stored = [np.frombuffer(vector, dtype="<f4") for _, vector in sampled]
        if all(v.shape == m.shape and np.allclose(v, m, atol=1e-6) for v, m in zip(stored, made)):
            return identity_of(model), path
    return "", None


def forward(apps, schema_editor) -> None:
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        sampled = _sample(cursor)
    maker, path = _maker(sampled) if sampled else ("", None)
    if sampled and not maker:
        warnings.warn("memory 0018: the store's vectors were made by neither LEDGER_EMBEDDER nor HashingEmbedder; "
                      "the similarity search skips them until `manage.py reembed` makes them again",
                      RuntimeWarning, stacklevel=1)
    elif sampled and path != settings.LEDGER_EMBEDDER:
        warnings.warn(f"memory 0018: the store's vectors were made by {path}, not by LEDGER_EMBEDDER "
                      f"({settings.LEDGER_EMBEDDER}); the similarity search skips them until `manage.py reembed` "
                      "makes them again (or set LEDGER_EMBEDDER to it)", RuntimeWarning, stacklevel=1)
    add = "ALTER TABLE memory_derivedartifact ADD COLUMN embedder varchar(100) NOT NULL DEFAULT %s"
    if connection.vendor == "postgresql":
        schema_editor.execute(add, params=[maker])
        schema_editor.execute("ALTER TABLE memory_derivedartifact ALTER COLUMN embedder SET DEFAULT ''", params=None)
    else:
        schema_editor.execute(add.replace("%s", "''"), params=None)
        if maker:
            schema_editor.execute(f"UPDATE memory_derivedartifact SET embedder = %s WHERE {LIVE}", params=[maker])


def backward(apps, schema_editor) -> None:
    schema_editor.execute("ALTER TABLE memory_derivedartifact DROP COLUMN embedder", params=None)


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0017_record_duplicate_indexes_dropped"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(model_name="derivedartifact", name="embedder",
                                    field=models.CharField(blank=True, db_default="", max_length=100)),
            ],
            database_operations=[migrations.RunPython(forward, backward)],
        ),
    ]
