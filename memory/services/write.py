"""Writing into the governed store: records and the artifacts derived from them."""
from __future__ import annotations

import secrets
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from memory import errors
from memory.embedding import embedded_text, embedder, embedder_identity, vector_to_bytes
from memory.models import ArtifactKind, DerivedArtifact, Lineage, Record, RecordTag, Subject, Tenant, Tier
from memory.services.scopes import scope_get_or_create
from memory.subjects import subject_ref_normalize
from retention.locks import lock_for_new_record, retention_table_lock
from retention.models import ContentClass
from tombstones.verification import commitment_of

MAX_TAGS = 20
MAX_SOURCES = 1000


def subject_get_or_create(*, tenant: Tenant, ref: str) -> Subject:
    """The tenant's subject with this reference in normal form (memory.subjects), created if new;
    `invalid_subject` (400) for a reference that has no valid normal form."""
    ref = subject_ref_normalize(ref)
    try:
        with transaction.atomic():
            subject, _ = Subject.objects.get_or_create(tenant=tenant, ref=ref, merged_into__isnull=True)
    except IntegrityError:
        subject = Subject.objects.get(tenant=tenant, ref=ref, merged_into__isnull=True)
    return subject


def _content_valid(content: object) -> str:
    if not isinstance(content, str):
        raise errors.invalid("invalid_content", "content must be a string.")
    if len(content) > settings.LEDGER_MAX_CONTENT_CHARS:
        raise errors.invalid("content_too_large",
                             f"content is limited to {settings.LEDGER_MAX_CONTENT_CHARS} characters.")
    return content


def record_write(
    *,
    tenant: Tenant,
    scope_path: str,
    content_class_name: str,
    content: str,
    subject_ref: str | None = None,
    tier: str = Tier.HOT,
    tags: list[str] | None = None,
    created_at: datetime | None = None,
    embed: bool = True,
) -> Record:
    """Write one record with its lock computed from the retention table and the holds.

    The record gets an embedding artifact (derived from it) so that similarity search can find it.
    """
    content = _content_valid(content)
    if tier not in Tier.values:
        raise errors.invalid("invalid_tier", f"tier must be one of {Tier.values}.")
    tags = sorted(set(tags or []))
    if len(tags) > MAX_TAGS or any(not isinstance(t, str) or not 0 < len(t) <= 100 for t in tags):
        raise errors.invalid("invalid_tags", f"tags are at most {MAX_TAGS} strings of 1 to 100 characters.")
    content_class = ContentClass.objects.filter(tenant=tenant, name=content_class_name).first()
    if content_class is None:
        raise errors.invalid("unknown_content_class", "No such content class; legal defines them.",
                             content_class=str(content_class_name)[:100])
    created_at = created_at or timezone.now()
    salt = secrets.token_hex(16)
    with transaction.atomic():
        # Before any row lock: a rule or hold being placed for the tenant waits for this write, or it for them.
        retention_table_lock(tenant.pk, shared=True)
        scope = scope_get_or_create(tenant=tenant, path=scope_path)
        subject = subject_get_or_create(tenant=tenant, ref=subject_ref) if subject_ref is not None else None
        record = Record.objects.create(
            tenant=tenant, scope=scope, subject=subject, content_class=content_class, content=content,
            salt=salt, commitment=commitment_of(content, salt), tier=tier, created_at=created_at,
            **lock_for_new_record(tenant_id=tenant.pk, content_class=content_class, created_at=created_at,
                                  subject_id=subject.pk if subject else None, scope_id=scope.pk),
        )
        RecordTag.objects.bulk_create([RecordTag(record=record, name=t) for t in tags])
        if embed:
            _artifact_create(tenant=tenant, scope=scope, kind=ArtifactKind.EMBEDDING, content="",
                             sources=[record], holder="")
    return record


def artifact_write(
    *,
    tenant: Tenant,
    kind: str,
    source_ids: list[int],
    content: str = "",
    holder: str = "",
) -> DerivedArtifact:
    """Write a derived artifact. Refused (409 `source_forgotten`) when any source is forgotten."""
    if kind not in ArtifactKind.values:
        raise errors.invalid("invalid_kind", f"kind must be one of {ArtifactKind.values}.")
    if (not isinstance(source_ids, list) or not source_ids or len(source_ids) > MAX_SOURCES
            or any(isinstance(i, bool) or not isinstance(i, int) for i in source_ids)):
        raise errors.invalid("invalid_derived_from", f"derived_from must be a list of 1 to {MAX_SOURCES} record ids.")
    content = _content_valid(content)
    if not isinstance(holder, str) or len(holder) > 200:
        raise errors.invalid("invalid_holder", "holder must be a string of at most 200 characters.")
    with transaction.atomic():
        # Lock the sources so that a concurrent forget cannot slip between the check and the write.
        sources = list(Record.objects.filter(tenant=tenant, pk__in=set(source_ids)).select_for_update().order_by("pk"))
        if len(sources) != len(set(source_ids)):
            missing = sorted(set(source_ids) - {s.pk for s in sources})
            raise errors.not_found("Some sources do not exist.", record_ids=missing[:100])
        forgotten = [s.pk for s in sources if s.is_forgotten]
        if forgotten:
            raise errors.conflict("source_forgotten", "A derived artifact cannot be written from a forgotten record.",
                                  record_ids=forgotten[:100])
        return _artifact_create(tenant=tenant, scope=sources[0].scope, kind=kind, content=content,
                                sources=sources, holder=holder)


def _artifact_create(*, tenant, scope, kind, content, sources, holder) -> DerivedArtifact:
    vector, made_by = None, ""
    if kind == ArtifactKind.EMBEDDING:
        vector = vector_to_bytes(embedder().embed([embedded_text(content, [s.content for s in sources])])[0])
        made_by = embedder_identity()
    artifact = DerivedArtifact.objects.create(
        tenant=tenant, scope=scope, kind=kind, content=content, vector=vector, embedder=made_by, holder=holder,
        created_at=timezone.now(),
    )
    Lineage.objects.bulk_create([Lineage(artifact=artifact, source=s) for s in sources])
    return artifact
