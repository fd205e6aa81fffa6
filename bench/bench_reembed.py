"""`manage.py reembed` (memory.services.reembed) on a store whose vectors another embedder made, beside the same
writes in raw SQL, in the same run.

    .venv/bin/python bench/bench_reembed.py                   # builds the store, measures
    .venv/bin/python bench/bench_reembed.py --reuse           # keeps the store of an earlier run

The store: bench_search.py's (the same builder and server; database ledger_bench_reembed): one tenant with
--records records (default 100,000), each with an embedding by the default `HashingEmbedder`, in the HNSW index.
Measured, with the semantic `WordLlamaEmbedder` as the configured embedder:
  embed only:  the model's `embed()` of every embedding's text, 500 texts a call, nothing read or written;
  service:     `reembed(batch_size=500)`: every vector made again and written (read, embed, UPDATE a batch);
  raw SQL:     the stored vectors written back, 500 a statement, by `UPDATE memory_derivedartifact a SET vector =
               v.vector, embedder = ... FROM unnest(ids, vectors) v WHERE a.id = v.id` on a plain psycopg
               connection: the writes alone (each new row version goes into the HNSW graph, as the service's
               do), their vectors made beforehand. It also puts the store back as it was built, for --reuse.
The service's time is set beside the raw writes plus the model's own time.
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
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--reuse", action="store_true", help="keep the store of an earlier run if it has this shape")
    args = parser.parse_args()
    # bench_search's store of this shape: one tenant, every record embedded, drawn words, the default embedder.
    return argparse.Namespace(records=args.records, noise_tenants=0, noise_records=0, embeddings=args.records,
                              noise_embeddings=0, seed=20, topics=0, corpus=None, embedder=bench_search.HASHING,
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

    from memory.embedding import embedder, embedder_identity
    from memory.services.reembed import _texts, embeddings_stale, reembed

    stored = bench_search._fetch("SELECT id, content, vector, embedder FROM memory_derivedartifact "
                                 "WHERE kind = 'embedding' AND vector IS NOT NULL ORDER BY id")
    made_by = {row[3] for row in stored}
    if made_by != {"hashing-256-v1"}:
        sys.exit(f"bench_reembed: the store's vectors are not all the default embedder's ({made_by}); "
                 "run without --reuse")
    print(f"PostgreSQL {bench_search._fetch('SHOW server_version')[0][0]}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}; {len(stored):,} embeddings of HashingEmbedder, made again by "
          f"WordLlamaEmbedder, {BATCH} a batch", flush=True)

    settings.LEDGER_EMBEDDER = SEMANTIC
    embedder.cache_clear()
    model = embedder()
    texts = _texts([(pk, content) for pk, content, _, _ in stored])
    started = time.perf_counter()
    for first in range(0, len(texts), BATCH):
        model.embed(texts[first:first + BATCH])
    embed_seconds = time.perf_counter() - started

    assert embeddings_stale().count() == len(stored)
    started = time.perf_counter()
    result = reembed(batch_size=BATCH)
    service_seconds = time.perf_counter() - started
    assert (result.made, result.left) == (len(stored), 0), result
    semantic = embedder_identity()

    raw = bench_search._raw_connect(url)
    started = time.perf_counter()
    for first in range(0, len(stored), BATCH):
        batch = stored[first:first + BATCH]
        raw.execute(RAW_UPDATE, ["hashing-256-v1", [pk for pk, _, _, _ in batch],
                                 [bytes(vector) for _, _, vector, _ in batch]])
    raw_seconds = time.perf_counter() - started
    raw.close()
    restored = bench_search._fetch("SELECT count(*) FROM memory_derivedartifact WHERE embedder = %s", [semantic])
    assert restored == [(0,)], "the raw writes did not put the store back"
    first_now = bench_search._fetch("SELECT vector FROM memory_derivedartifact WHERE id = %s", [stored[0][0]])
    assert bytes(first_now[0][0]) == bytes(stored[0][2]), "the raw writes did not put the store back"

    n = len(stored)
    print(f"{'':24} {'seconds':>9} {'vectors/s':>10}")
    print(f"{'embed only (model)':24} {embed_seconds:9.1f} {n / embed_seconds:10.0f}")
    print(f"{'service: reembed()':24} {service_seconds:9.1f} {n / service_seconds:10.0f}")
    print(f"{'raw SQL: the UPDATEs':24} {raw_seconds:9.1f} {n / raw_seconds:10.0f}")
    print(f"service / (model + raw writes): {service_seconds / (embed_seconds + raw_seconds):.2f}")


if __name__ == "__main__":
    main()
