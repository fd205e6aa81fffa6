"""Salts shredding: destroy every commitment salt that no subject's receipt still needs (DESIGN.md invariant 6).

A record's commitment in a public tombstone is sha256(salt || content). While the server keeps the salt, anyone
who reads its database can test guesses of the content against the commitment (e-mail addresses, names) even
after the content is erased. So the server keeps a salt only until it reaches the data subject, and then
destroys it: the subject's receipt becomes the only copy, enough to prove their data was covered.

How: by deletion. The salts are not kept encrypted under a key to destroy later: nothing needs them once the
subject has them, and a deleted row needs no key management to stay unreadable.

When: the notice that carries a request's receipts destroys their salts as it is marked sent (dsr.services.notify,
dsr.services.deferred): the tombstones' `TombstoneSalts` rows are deleted and the stored notice keeps its receipt
without them. A forget that no subject request asked for (an agent's, a sweep's) never keeps them. A record's own
salt goes with its content: with the row (hard), emptied with the content (redact). Kept meanwhile: the salts of
a request's tombstones until its notice is sent (its outcome notice, or the notice of a deferred erasure), and
a hidden record's salt on its row, beside content that is still there.

This sweep is the backstop, for salts kept before that was so and for anything a crash or a bug left: each batch
deletes up to SHRED_BATCH salts rows that no request awaits, and strips the salts from up to SHRED_BATCH sent
notices that still hold them. Set-based, idempotent, rows claimed with SKIP LOCKED: runs can overlap. Each batch
deletes what it claims, so the next one starts again from the first row left (the run has no id cursor).
"""
from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from dsr.models import RequestItem, SubjectNotice
from dsr.services.notify import receipt_as_kept
from memory.sweeps.common import SAMPLE, BatchResult

# Rows per batch: a salts row holds a tombstone's salts (up to 5,000 for a sweep's batch, ~240 kB), a notice
# ~8 kB; a thousand of each keeps a batch to a second or so.
SHRED_BATCH = 1000


def salts_awaited() -> QuerySet:
    """The tombstone ids whose salts a subject's receipt still needs: those of a request whose outcome notice is
    not sent yet (notified_at empty), or that has a notice not sent yet (a deferred erasure's)."""
    unsent = SubjectNotice.objects.filter(request_id=OuterRef("request_id"), sent_at__isnull=True)
    return (RequestItem.objects.filter(tombstone_id__isnull=False)
            .filter(Q(request__notified_at__isnull=True) | Exists(unsent)).values("tombstone_id"))


def _salts_unawaited() -> QuerySet:
    from tombstones.models import TombstoneSalts

    return TombstoneSalts.objects.exclude(tombstone_id__in=salts_awaited())


def _notices_holding_salts() -> QuerySet:
    """Sent notices whose stored receipt still has the salts (stored so before they were destroyed on sending)."""
    return SubjectNotice.objects.filter(sent_at__isnull=False, receipt__has_key="receipts").exclude(
        receipt__has_key="salts_destroyed_at")


def salts_shredding_batch(*, after: int | None = None, now: datetime | None = None,
                          batch_size: int = SHRED_BATCH) -> BatchResult:
    """Destroy one batch of salts no receipt awaits, and strip one batch of sent notices. `after` is not used:
    what a batch claims it deletes (or marks), so the next batch starts over."""
    from tombstones.services import salts_destroy

    now = now or timezone.now()
    with transaction.atomic():
        ids = list(_salts_unawaited().select_for_update(skip_locked=True).order_by("pk")
                   .values_list("pk", flat=True)[:batch_size])
        destroyed = salts_destroy(tombstone_ids=ids)
        notices = list(_notices_holding_salts().select_for_update(skip_locked=True).order_by("pk")
                       .values_list("pk", "receipt")[:batch_size])
        for pk, receipt in notices:
            kept, tombstone_ids = receipt_as_kept(receipt, sent_at=now)
            SubjectNotice.objects.filter(pk=pk).update(receipt=kept)
            destroyed += salts_destroy(tombstone_ids=tombstone_ids)
    result = BatchResult(more=len(ids) >= batch_size or len(notices) >= batch_size)
    result.counts.update(claimed=len(ids) + len(notices), salts_destroyed=destroyed, notices_stripped=len(notices))
    result.sample("tombstone_ids", [str(i) for i in ids])
    return result


def salts_shredding_preview(*, now: datetime) -> dict:
    unawaited = _salts_unawaited()
    return {
        "would_destroy": unawaited.count(),
        "would_strip_notices": _notices_holding_salts().count(),
        "sample": [str(i) for i in unawaited.order_by("pk").values_list("pk", flat=True)[:SAMPLE]],
        **salts_shredding_summary(now=now),
    }


def salts_shredding_summary(*, now: datetime) -> dict:
    """The salts kept, and why: each awaits a subject's receipt."""
    from tombstones.models import TombstoneSalts

    return {"kept_for_receipts": TombstoneSalts.objects.filter(tombstone_id__in=salts_awaited()).count()}
