"""Making the store's vectors again with the configured embedder (`manage.py reembed`), after LEDGER_EMBEDDER has
changed: vectors of two embedders are not comparable, and the similarity search compares a query only with the
vectors its own embedder made (`DerivedArtifact.embedder`; memory.embedding).

Set-based: per batch, one read of the embeddings (and one of their sources' contents), one `embed()` of all their
texts, one UPDATE. The UPDATE writes only rows that are still live embeddings of another embedder, in its own
WHERE: an artifact forgotten or redacted while its batch was being embedded (the forget commits between the read
and the write) is re-checked by PostgreSQL on its newest version and left as the forget left it, so a re-embed
never writes a vector back; nor does it read or write a forgotten one. A hidden (soft-forgotten) embedding that
is restored later comes back with its old embedder's vector: the next run makes it again.

A run can stop anywhere and run again: it picks up the rows still to do. The search finds each row's new vector
from its batch's commit on; the rows still to do are passed over by the search meanwhile.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from django.db import transaction
from django.db.models import QuerySet

from memory.embedding import embedded_text, embedder, embedder_identity, vector_to_bytes
from memory.models import ArtifactKind, DerivedArtifact, Lineage

BATCH = 500
MAX_BATCH = 5_000


@dataclass(frozen=True)
class ReembedResult:
    embedder: str  # the identity the vectors were made again with
    made: int      # vectors made again and written
    skipped: int   # forgotten or redacted between their batch's read and its write: not written
    left: int      # live embeddings of another embedder after the run (0 unless rows came meanwhile)


def _live_embeddings() -> QuerySet:
    return DerivedArtifact.objects.filter(kind=ArtifactKind.EMBEDDING, vector__isnull=False,
                                          forgotten_at__isnull=True, redacted_at__isnull=True)


def embeddings_stale() -> QuerySet:
    """The live embeddings the configured embedder did not make: not found by the similarity search until made
    again."""
    return _live_embeddings().exclude(embedder=embedder_identity())


def _texts(rows: list[tuple[int, str]]) -> list[str]:
    """Each artifact's embedded text (memory.embedding.embedded_text), its sources read in one query."""
    sourced = [pk for pk, content in rows if not content]
    contents: dict[int, list[str]] = {}
    if sourced:
        for artifact_id, content in (Lineage.objects.filter(artifact_id__in=sourced)
                                     .order_by("artifact_id", "source_id")
                                     .values_list("artifact_id", "source__content")):
            contents.setdefault(artifact_id, []).append(content)
    return [embedded_text(content, contents.get(pk, [])) for pk, content in rows]


def reembed(*, batch_size: int = BATCH, on_batch: Callable[[int, int], None] | None = None) -> ReembedResult:
    """Every live embedding of another embedder made again by the configured one, a batch at a time (each in its
    own transaction). `on_batch(made, skipped)` is told after each batch."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH:
        raise ValueError(f"batch_size must be a whole number from 1 to {MAX_BATCH}")
    model, identity = embedder(), embedder_identity()
    made = skipped = after = 0
    while True:
        rows = list(embeddings_stale().filter(pk__gt=after).order_by("pk").values_list("pk", "content")[:batch_size])
        if not rows:
            break
        vectors = model.embed(_texts(rows))
        remade = [DerivedArtifact(pk=pk, vector=vector_to_bytes(vector), embedder=identity)
                  for (pk, _), vector in zip(rows, vectors)]
        with transaction.atomic():
            written = embeddings_stale().bulk_update(remade, ["vector", "embedder"], batch_size=len(remade))
        made, skipped, after = made + written, skipped + len(rows) - written, rows[-1][0]
        if on_batch:
            on_batch(written, len(rows) - written)
    return ReembedResult(embedder=identity, made=made, skipped=skipped, left=embeddings_stale().count())
