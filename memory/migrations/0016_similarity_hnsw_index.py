"""The similarity search's index (issue 20): pgvector's HNSW over the live embeddings, on PostgreSQL.

`memory_derivedartifact.embedding`, a stored generated `vector(256)` column: the artifact's `vector` bytes
(float32 little-endian, memory.embedding) decoded by `memory_vector_of()`, while the artifact is an embedding
that is live (not forgotten, not redacted) and of the index's dimension; NULL otherwise. An HNSW index
(`vector_cosine_ops`: the search scores by cosine, memory.selectors) covers the column; pgvector does not put
a NULL in the graph. So:
  - every write of an embedding, by the service or by raw SQL, is in the index in its own statement, and
    restoring an artifact puts it back;
  - a forget takes the vector out of the index in its own UPDATE or DELETE, in the forget's transaction,
    whatever path runs it (a soft forget sets `forgotten_at`, a redaction empties `vector`, a hard forget
    deletes the row): the column becomes NULL and the new row version is not in the graph (the old version's
    graph node is a dead tuple until VACUUM, which no scan returns);
  - nothing can set the column to anything else (a generated column takes no value but DEFAULT, whoever
    writes).

Why a column of the artifact row and not a table of its own keyed by artifact id: the one UPDATE that forgets
an artifact is the one that clears its vector (no second statement to forget, no trigger to keep in step),
raw SQL included; Django's flush (TRUNCATE) and the application role's table grants need nothing new; the
similarity query filters by the row's own `tenant_id`. The guard triggers (0003, 0013) watch records only, and
a BEFORE trigger never sees a generated column: nothing there to change.

Why 256: what the embedders of memory.embedding make; HNSW needs the dimension in the column's type. An embedder
of another dimension writes rows the column leaves NULL, and the similarity search falls back to its exact NumPy
scan (memory.selectors).

HNSW parameters: m = 32, ef_construction = 128 (bench/README.md: recall@10 against exact brute force); the
search sets `hnsw.ef_search` and pgvector 0.8's iterative scan per query (memory.selectors).

On a store that has embeddings already, the index is built CONCURRENTLY, after the column's transaction has
committed: reads and writes of the artifacts go on while the graph is built, by far the longest step, and only
the column's table rewrite holds the table's exclusive lock (README, "Migrating an existing store", has the
times and the memory to give the build). Meanwhile a similarity search is answered exactly, without the index
(slower, not wrong). A build cut short (cancelled, the server stopped) leaves an invalid index behind, which no
query uses: running the migration again drops it and builds it anew; every other step can run again too.

Without pgvector: `CREATE EXTENSION vector` needs the extension installed on the server, and (pgvector is not a
trusted extension) a superuser, unless it exists already (README: what a production database needs). A
PostgreSQL without pgvector available at all gets no column and no index, with a warning: the similarity search
stays on the exact scan there (memory.selectors finds out per connection). Installing pgvector later and
running `manage.py migrate memory 0015 && manage.py migrate` builds them.

SQLite (the embedded default): nothing; the search scans with NumPy (README, decision on sqlite-vec).
"""
import warnings

from django.db import migrations, transaction

from memory.migrations import _concurrently as concurrently

DIM = 256
COLUMN = "embedding"
INDEX = "memory_artifact_embedding_hnsw_idx"
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 128

# float32 little-endian words to a vector: sign, exponent and mantissa of each word, subnormals included,
# exactly (a float8 holds every float32; the real[] cast is then exact). IMMUTABLE: a generated column's.
DECODE = """
CREATE OR REPLACE FUNCTION memory_vector_of(b bytea) RETURNS vector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT array_agg(
    CASE WHEN e = 0 THEN m * (2.0::float8 ^ -149)
         ELSE (1 + m / 8388608.0::float8) * (2.0::float8 ^ (e - 127)) END
    * (1 - 2 * s) ORDER BY i)::real[]::vector
FROM (SELECT i, (w >> 31) & 1 AS s, (w >> 23) & 255 AS e, w & 8388607 AS m
      FROM (SELECT i, (get_byte(b, 4 * i)::bigint) | (get_byte(b, 4 * i + 1)::bigint << 8)
                    | (get_byte(b, 4 * i + 2)::bigint << 16) | (get_byte(b, 4 * i + 3)::bigint << 24) AS w
            FROM generate_series(0, length(b) / 4 - 1) AS i) words) parts
$$
"""
LIVE = f"kind = 'embedding' AND forgotten_at IS NULL AND redacted_at IS NULL AND length(vector) = {DIM * 4}"

PG_COLUMN = [
    "CREATE EXTENSION IF NOT EXISTS vector",
    DECODE,
    f"ALTER TABLE memory_derivedartifact ADD COLUMN IF NOT EXISTS {COLUMN} vector({DIM}) GENERATED ALWAYS AS "
    f"(CASE WHEN {LIVE} THEN memory_vector_of(vector) END) STORED",
]
PG_INDEX = (f"CREATE INDEX CONCURRENTLY {INDEX} ON memory_derivedartifact USING hnsw ({COLUMN} vector_cosine_ops) "
            f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})")
PG_REVERSE = [
    f"DROP INDEX IF EXISTS {INDEX}",
    f"ALTER TABLE memory_derivedartifact DROP COLUMN IF EXISTS {COLUMN}",
    "DROP FUNCTION IF EXISTS memory_vector_of(bytea)",
]


def forward(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        available = cursor.fetchone() is not None
    if not available:
        warnings.warn("pgvector is not installed on this PostgreSQL: no similarity index (memory 0016); the "
                      "similarity search scans exactly", RuntimeWarning, stacklevel=1)
        return
    with transaction.atomic(using=schema_editor.connection.alias):
        for statement in PG_COLUMN:
            schema_editor.execute(statement, params=None)
    index_build(schema_editor)


def index_valid(connection) -> bool | None:
    """Whether the HNSW index is valid (False: left invalid by a build cut short), None when there is none."""
    return concurrently.index_valid(connection, INDEX)


def index_build(schema_editor) -> None:
    """The HNSW index, built CONCURRENTLY (outside any transaction: this migration is not atomic); an invalid
    one, left by a build cut short, is dropped first."""
    concurrently.index_build(schema_editor, INDEX, PG_INDEX)


def backward(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for statement in PG_REVERSE:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):

    # CREATE INDEX CONCURRENTLY cannot run in a transaction; the column's statements have one of their own.
    atomic = False

    dependencies = [
        ("memory", "0015_subject_ref_search_index"),
    ]

    operations = [migrations.RunPython(forward, backward)]
