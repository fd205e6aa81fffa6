"""`manage.py reembed` (memory.services.reembed) on a store whose vectors another embedder made, beside the same
writes in raw SQL, in the same run.

    .venv/bin/python bench/bench_reembed.py                   # builds the store, measures
    .venv/bin/python bench/bench_reembed.py --reuse           # keeps the store of an earlier run

The store: bench_search.py's (the same builder and server; database ledger_bench_reembed): one tenant with
--records records (default 50,000), each with an embedding by `HashingEmbedder` (the former default), in the HNSW
index.
Measured, with the semantic `WordLlamaEmbedder` as the configured embedder:
  embed only:  the model's `embed()` of every embedding's text, 500 texts a call, nothing read or written;
  service:     `reembed(batch_size=500)`: every vector made again and written (read, embed, UPDATE a batch),
               each new row version inserted into the HNSW graph;
  raw SQL:     the same new vectors (made beforehand, by the embed-only step) written 500 a statement by
               `UPDATE memory_derivedartifact a SET vector = v.vector, embedder = ... FROM unnest(ids, vectors) v
               WHERE a.id = v.id` on a plain psycopg connection: the writes alone, into the graph too;
and then the same two with the index dropped first and built again at the end (`rebuild_index=True`; raw: `DROP
INDEX CONCURRENTLY`, the UPDATEs, memory 0016's `CREATE INDEX CONCURRENTLY`).
Raw SQL runs first; after each timed phase the store is put back as it was built (untimed: the stored vectors
written back with the index rebuilt, then a VACUUM), so that each phase starts from the same store and writes the
same vectors into the same graph. The service's time is set beside the raw writes plus the model's own time; the
last column is each phase's time after its last write (the index's build; for the service, its closing count too).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_search  # noqa: E402  (the store's builder and server)

NAME = "ledger_bench_reembed"
SEMANTIC = "memory.embedding.WordLlamaEmbedder"
BATCH = 500
RAW_UPDATE = ("UPDATE memory_derivedartifact a SET vector = v.vector, embedder = %s "
              "FROM unnest(%s::bigint[], %s::bytea[]) AS v(id, vector) WHERE a.id = v.id")


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--reuse", action="store_true", help="keep the store of an earlier run if it has this shape")
    args = parser.parse_args()
    # bench_search's store of this shape: one tenant, every record embedded, drawn words, HashingEmbedder.
    return argparse.Namespace(records=args.records, noise_tenants=0, noise_records=0, embeddings=args.records,
                              noise_embeddings=0, seed=20, topics=0, corpus=None, embedder=bench_search.HASHING,
                              interleave=False,
                              reuse=args.reuse)


def main() -> None:
    args = _args()
    url = os.environ.get("DATABASE_URL")
    if not url:
        from config.testdb import database_url

        url = database_url(ROOT / "var" / "bench", name=NAME, settings=bench_search.SERVER_SETTINGS)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-not-for-any-deployment")
    os.environ.setdefault("LEDGER_SIGNING_PASSPHRASE", "bench-only-signing-passphrase")
    os.environ["LEDGER_EMBEDDER"] = bench_search.HASHING
    bench_search._database_ensure(url, fresh=not args.reuse)

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    if not bench_search._store_built(args):
        if args.reuse:
            sys.exit("bench_reembed: --reuse, but the database holds no store of this shape; run without --reuse.")
        bench_search._store_build(args)
    measure(url)


def measure(url: str) -> None:
    from django.conf import settings
    from django.db import connection

    from memory.embedding import embedder, embedder_identity, vector_to_bytes
    from memory.services.reembed import _texts, embeddings_stale, reembed, similarity_index

    stored = bench_search._fetch("SELECT id, content, vector, embedder FROM memory_derivedartifact "
                                 "WHERE kind = 'embedding' AND vector IS NOT NULL ORDER BY id")
    made_by = {row[3] for row in stored}
    if made_by != {"hashing-256-v1"}:
        sys.exit(f"bench_reembed: the store's vectors are not all HashingEmbedder's ({made_by}); "
                 "run without --reuse")
    print(f"PostgreSQL {bench_search._fetch('SHOW server_version')[0][0]}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}; {len(stored):,} embeddings of HashingEmbedder, made again by "
          f"WordLlamaEmbedder, {BATCH} a batch", flush=True)

    settings.LEDGER_EMBEDDER = SEMANTIC
    embedder.cache_clear()
    model = embedder()
    texts = _texts([(pk, content) for pk, content, _, _ in stored])
    started = time.perf_counter()
    remade = [vector_to_bytes(vector) for first in range(0, len(texts), BATCH)
              for vector in model.embed(texts[first:first + BATCH])]
    embed_seconds = time.perf_counter() - started
    semantic = embedder_identity()
    index = similarity_index()
    ids = [pk for pk, _, _, _ in stored]
    hashed = [bytes(vector) for _, _, vector, _ in stored]

    def vacuum() -> None:
        """The old row versions out of the table and the graph, so that each timed phase starts alike (a phase
        leaves one dead version, and one dead graph node, per vector)."""
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE memory_derivedartifact")

    def raw_writes(vectors: list[bytes], identity: str, rebuild_index: bool) -> tuple[float, float]:
        """Seconds in all, and of them the index's build (0 into the index)."""
        raw = bench_search._raw_connect(url)
        started = time.perf_counter()
        if rebuild_index:
            raw.execute(f"DROP INDEX CONCURRENTLY {index.INDEX}")
        for first in range(0, len(ids), BATCH):
            raw.execute(RAW_UPDATE, [identity, ids[first:first + BATCH], vectors[first:first + BATCH]])
        written = time.perf_counter()
        if rebuild_index:
            raw.execute(index.PG_INDEX)
        ended = time.perf_counter()
        raw.close()
        assert bench_search._fetch("SELECT count(*) FROM memory_derivedartifact WHERE embedder = %s",
                                   [identity]) == [(len(ids),)]
        assert index.index_valid(connection) is True
        return ended - started, ended - written

    def restore() -> None:
        """The store as it was built (HashingEmbedder's vectors), untimed."""
        raw_writes(hashed, "hashing-256-v1", rebuild_index=True)
        vacuum()

    def service(rebuild_index: bool) -> tuple[float, float]:
        """Seconds in all, and of them what came after the last batch's write (the index's build, the count)."""
        assert embeddings_stale().count() == len(stored)
        batches = []
        started = time.perf_counter()
        result = reembed(batch_size=BATCH, rebuild_index=rebuild_index,
                         on_batch=lambda made, skipped: batches.append(time.perf_counter()))
        ended = time.perf_counter()
        assert (result.made, result.left, result.index_rebuilt) == (len(stored), 0, rebuild_index), result
        assert bench_search._fetch("SELECT vector FROM memory_derivedartifact WHERE id = %s",
                                   [ids[-1]])[0][0] == remade[-1], "not the vectors the raw side wrote"
        return ended - started, ended - batches[-1]

    n = len(stored)
    rows = [("embed only (model)", embed_seconds, 0.0)]
    for rebuild_index in (False, True):
        how = "index rebuilt" if rebuild_index else "into the index"
        vacuum()
        rows.append((f"raw SQL, {how}", *raw_writes(remade, semantic, rebuild_index)))
        print(f"  {rows[-1][0]}: {rows[-1][1]:.1f} s", flush=True)
        restore()
        rows.append((f"service, {how}", *service(rebuild_index)))
        print(f"  {rows[-1][0]}: {rows[-1][1]:.1f} s", flush=True)
        restore()
    assert bytes(bench_search._fetch("SELECT vector FROM memory_derivedartifact WHERE id = %s",
                                     [ids[0]])[0][0]) == hashed[0], "the store is not back as it was built"

    print(f"{'':28} {'seconds':>9} {'vectors/s':>10} {'after the writes (s)':>21}")
    for label, seconds, after in rows:
        print(f"{label:28} {seconds:9.1f} {n / seconds:10.0f} {after:21.1f}")
    for i, how in ((1, "into the index"), (3, "index rebuilt")):
        print(f"service / (model + raw), {how}: {rows[i + 1][1] / (embed_seconds + rows[i][1]):.2f}")


if __name__ == "__main__":
    main()
