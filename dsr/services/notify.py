"""Telling the subject: what was erased, what was kept and why (GDPR Art. 12(4)), with their receipts,
the link to the public verification page, and the recipients of their data (Art. 19).

The notice is stored with what it said, and marked sent once the mail backend took it. Once sent, the salts
its receipt carried are destroyed (crypto-shredding, DESIGN.md invariant 6): the tombstones' (`salts_destroy`)
and the stored notice's copy (`receipt_as_kept`), in the transaction that marks it sent. The subject's receipt
is then the only copy; a request with no address on file gets its notice kept on record without them.
"""
from __future__ import annotations

import json
import logging
import re
from collections import Counter, defaultdict

import orjson

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import connection, transaction
from django.utils import timezone

from config.errors import ApplicationError
from dsr.models import ItemDecision, ItemKind, ItemOutcome, RequestItem, RequestType, SubjectNotice
from dsr.models import SubjectRequest
from dsr.services.states import histories_add
from memory.lookups import batches
from memory.models import ArchiveDeletion, FleetCopyNotice
from tombstones.plain import plural
from tombstones.receipt import receipts_bundle

logger = logging.getLogger(__name__)

RIGHTS = ("You have the right to lodge a complaint with a supervisory authority and to seek a judicial remedy "
          "(GDPR Art. 12(4), Art. 77 and Art. 79).")


def step_notify(*, request_id: int):
    """Compose (once), send and mark sent, for a group of finished requests (dsr/services/workflow.py:
    `group_claim`), all under their row locks: a second delivery of this step waits, then finds its request
    notified. A crash after sending but before the commit sends again on the next delivery: subjects told
    twice rather than never. A mail the backend refuses leaves that request un-notified (its notice is not
    stored) and the others go on; the message's own request raises after the commit, as before."""
    from dsr.services.workflow import NOTIFY, StepResult, WORKFLOW, found_done, group_claim
    from tombstones.services import salts_destroy

    if (done := found_done(request_id=request_id, step=NOTIFY)) is not None:
        return done
    failed: Exception | None = None
    with transaction.atomic():
        own, group = group_claim(request_id=request_id, step=NOTIFY)
        if not group:
            return StepResult(False, None)
        now = timezone.now()
        earlier: dict[int, list[tuple]] = defaultdict(list)
        for request_pk, pk, sent_at in (SubjectNotice.objects.filter(request_id__in=[r.pk for r in group],
                                                                     kind__startswith="outcome")
                                        .order_by("pk").values_list("request_id", "pk", "sent_at")):
            earlier[request_pk].append((pk, sent_at))
        composed = _notices_compose([r for r in group if not any(sent is None for _, sent in earlier[r.pk])],
                                    earlier=earlier, sent_at=now)
        notified, notes, stored = [], {}, []
        sent_tombstones: list[str] = []
        for request in group:
            unsent = next((pk for pk, sent_at in earlier[request.pk] if sent_at is None), None)
            # An outbox row left by an earlier version of this step is sent as written; otherwise the notice
            # just composed is stored as sent, in the transaction that sends it: if the mail backend refuses,
            # it is not stored, and the next delivery composes and sends again.
            notice = SubjectNotice.objects.get(pk=unsent) if unsent is not None else composed[request.pk]
            try:
                _send(request, notice)
            except (ApplicationError, OSError) as exc:  # a mail refused (smtplib's errors are OSErrors)
                logger.warning("request %s: the notice could not be sent (%r); left for its own delivery",
                               request.pk, exc)
                if request is own:
                    failed = exc
                continue
            notice.receipt, tombstone_ids = receipt_as_kept(notice.receipt, sent_at=now)
            sent_tombstones += tombstone_ids
            if unsent is not None:
                SubjectNotice.objects.filter(pk=notice.pk).update(sent_at=now, receipt=notice.receipt)
            else:
                stored.append(notice)
            notified.append(request)
            notes[request.pk] = ("outcome sent to the subject" if notice.to
                                 else "no address on file: outcome kept on record") + (
                f"; the salts of its {len(tombstone_ids)} tombstones destroyed" if tombstone_ids else "")
        _notices_store(stored)
        salts_destroy(tombstone_ids=sent_tombstones)
        SubjectRequest.objects.filter(pk__in=[r.pk for r in notified]).update(notified_at=now)
        histories_add(requests=notified, action="subject_notified", actor=WORKFLOW, notes=notes)
    if failed is not None:
        raise failed
    return StepResult(True, None)


# Notices per INSERT: a group's (LEDGER_WORKFLOW_GROUP_SIZE, 50) in one statement; at ~8 kB a notice (the
# body and two receipts), 100 keep a statement near 1 MB.
NOTICE_BATCH = 100
_NOTICE_COLUMNS = ("request_id", "kind", "to", "subject_line", "body", "receipt", "sent_at", "created_at")


def _notices_store(notices: list[SubjectNotice]) -> None:
    """`bulk_create` of new notices; on PostgreSQL one written-out INSERT per NOTICE_BATCH, each receipt
    encoded by orjson and cast to jsonb by the server (bulk_create spent ~0.22 ms of CPU a notice, most of
    it `json.dumps` of the ~7 kB receipt through psycopg's Jsonb; this ~0.07). jsonb keeps the value, not
    the text, so the encoder's spelling does not matter; what orjson refuses (a non-str key, an int past
    64 bits) is encoded by `json` as JSONField would."""
    if connection.vendor != "postgresql":
        SubjectNotice.objects.bulk_create(notices)
        return
    created_at = timezone.now()
    quote = connection.ops.quote_name
    columns = ", ".join(quote(SubjectNotice._meta.get_field(name.removesuffix("_id")).column)
                        for name in _NOTICE_COLUMNS)
    for batch in batches(notices, NOTICE_BATCH):
        params = []
        for notice in batch:
            params += [notice.request_id, notice.kind, notice.to, notice.subject_line, notice.body,
                       _jsonb_text(notice.receipt), notice.sent_at, created_at]
        rows = ", ".join(["(%s, %s, %s, %s, %s, %s::jsonb, %s, %s)"] * len(batch))
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {quote(SubjectNotice._meta.db_table)} ({columns}) VALUES {rows}", params)


def _jsonb_text(document) -> str | None:
    if document is None:
        return None  # SQL NULL, as JSONField(null=True) stores None
    try:
        return orjson.dumps(document).decode()
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(document)


def receipt_as_kept(receipt: dict | None, *, sent_at) -> tuple[dict | None, list[str]]:
    """A notice's receipt as it is kept once sent, and the tombstones whose receipts it carried (their salts are
    to be destroyed). Kept: everything the subject was sent (envelopes, proofs, checkpoints) but the salts, and
    when they were destroyed. An access request's export and a receipt kept so before are left as they are."""
    if not isinstance(receipt, dict) or not isinstance(receipt.get("receipts"), list) or "salts_destroyed_at" in receipt:
        return receipt, []
    receipts = [{key: value for key, value in item.items() if key != "salts"} if isinstance(item, dict) else item
                for item in receipt["receipts"]]
    tombstone_ids = [item["tombstone_id"] for item in receipts if isinstance(item, dict) and item.get("tombstone_id")]
    return {**receipt, "receipts": receipts, "salts_destroyed_at": sent_at.isoformat()}, tombstone_ids


def _send(request: SubjectRequest, notice: SubjectNotice) -> None:
    if not notice.to:
        return
    message = EmailMessage(subject=notice.subject_line, body=notice.body, to=[notice.to],
                           from_email=settings.DEFAULT_FROM_EMAIL)
    # A bundle without receipts (a deferred notice whose records another process erased) has nothing to verify:
    # attached, it would read as "malformed" on /verify/.
    if not (isinstance(notice.receipt, dict) and notice.receipt.get("receipts") == []):
        message.attach(attachment_name(request.pk, notice.receipt), receipt_text(notice.receipt), "application/json")
    message.send()


def attachment_name(request_id: int, receipt: dict | None) -> str:
    """The attachment's file name: a receipt bundle is a receipt (what /verify/ and `python -m tombstones.verify`
    take); an access request's export is the subject's data, named so that no one takes it for a receipt."""
    if isinstance(receipt, dict) and "export" in receipt:
        return f"data-export-request-{request_id}.json"
    return f"receipt-request-{request_id}.json"


_NOT_ASCII = re.compile(r"[^\x00-\x7e]")


def _escaped(match: re.Match) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xd800 | code >> 10:04x}\\u{0xdc00 | code & 0x3ff:04x}"


def receipt_text(receipt: dict | None) -> str:
    """The attachment: exactly the text of `json.dumps(receipt, indent=2)` (ASCII, non-ASCII characters
    escaped as \\uXXXX), made by orjson in ~5 µs instead of ~100: same indentation, separators and key order;
    what orjson writes as UTF-8 (the checkpoint's em dash) escaped as `json` does, DEL too. For what an
    erasure's receipt is made of (str, int, dicts with str keys, lists: tombstones/receipts.py); orjson would
    write a float differently (1e16 against 1e+16), so an access request's export (anything its records
    hold) goes through `json`, as does what orjson refuses (a non-str key, a lone surrogate)."""
    if receipt is None or "export" in receipt:
        return json.dumps(receipt, indent=2)
    try:
        text = orjson.dumps(receipt, option=orjson.OPT_INDENT_2).decode()
    except TypeError:  # orjson.JSONEncodeError: a key that is not a str, a lone surrogate, an int past 64 bits
        return json.dumps(receipt, indent=2)
    if text.isascii() and "\x7f" not in text:
        return text
    # Past ASCII, an erasure's receipt usually holds only its checkpoints' em dashes: escaped by a plain
    # replace (a fast search), the regex left for anything else, as it tests every character of the ~7 kB
    # (3% of the erasure workflow's instructions in the worker: bench/workflow_instructions.py).
    text = text.replace("\u2014", "\\u2014")
    return text if text.isascii() and "\x7f" not in text else _NOT_ASCII.sub(_escaped, text)


_ITEM_FIELDS = ("request_id", "kind", "object_id", "artifact_kind", "decision", "outcome", "reason", "deferred_until",
                "forget_event_id", "tombstone_id")


def _notices_compose(requests: list[SubjectRequest], *, earlier: dict[int, list], sent_at) -> dict[int, SubjectNotice]:
    """Each request's outcome notice (not saved), for requests of one tenant, with one query per table for
    all of them: their items, their recipients, and the receipts of all their tombstones (one checkpoint)."""
    from tombstones.services import receipts_build

    if not requests:
        return {}
    items: dict[int, list[RequestItem]] = defaultdict(list)
    # Named rows, not model instances (~40% of the step's CPU went to building 1,000 instances a group);
    # the compose functions below read only these attributes.
    for item in (RequestItem.objects.filter(request_id__in=[r.pk for r in requests]).order_by("pk")
                 .values_list(*_ITEM_FIELDS, named=True)):
        items[item.request_id].append(item)
    tombstones = {r.pk: sorted({str(i.tombstone_id) for i in items[r.pk] if i.tombstone_id})
                  for r in requests if r.type != RequestType.ACCESS}
    # A later notice of a request (after legal's decision) carries again the tombstones of the first, whose
    # salts the subject received then and that we destroyed: their receipts come without.
    receipts = receipts_build(tombstone_ids=[t for ids in tombstones.values() for t in ids], destroyed_salts_ok=True)
    recipients = _recipients(items)
    return {request.pk: _notice_compose(request, items[request.pk], earlier=len(earlier[request.pk]), sent_at=sent_at,
                                        receipts=receipts, recipients=recipients)
            for request in requests}


def _notice_compose(request: SubjectRequest, items: list[RequestItem], *, earlier: int, sent_at, receipts: dict,
                    recipients: dict) -> SubjectNotice:
    tombstone_ids = sorted({str(i.tombstone_id) for i in items if i.tombstone_id})
    receipt = receipts_bundle(request=request.pk, receipts=[receipts[t] for t in tombstone_ids])
    if request.type == RequestType.ACCESS:
        receipt = {"request": request.pk, "export": request.export}
    lines = [f"Your {request.get_regulation_display()} {request.get_type_display()} request {request.pk}, "
             f"received {request.received_at:%Y-%m-%d}, is {request.get_status_display().lower()}.", ""]
    lines += _erased_lines(items) if request.type != RequestType.ACCESS else [
        f"Attached is a copy of the data we hold about you: {len(request.export['records'])} records."]
    kept = [i for i in items if i.decision == ItemDecision.HIDE and request.type == RequestType.ERASURE]
    if kept:
        lines += ["", f"We kept {len(kept)} records because the law or a legal hold requires it. They are hidden and "
                  "no longer processed for any other purpose; they will be erased when the obligation ends:"]
        lines += [f"- record {i.object_id}: {i.reason.get('authority') or i.reason.get('code')}, "
                  f"{'until ' + i.deferred_until.date().isoformat() if i.deferred_until else 'until the hold is released'}"
                  for i in kept]
        lines += ["", RIGHTS]
    lines += _recipient_lines(items, recipients)
    if tombstone_ids:
        lines += ["", "Proof: each erasure left a signed tombstone. You can check them yourself, without an account, at:"]
        lines += [f"  {settings.LEDGER_PUBLIC_URL.rstrip('/')}/verify/?id={t}" for t in tombstone_ids]
        lines += ["The attached receipt holds the signed tombstones, their proofs of inclusion in our public log, and "
                  "the salts that let you show that a piece of your data was among what was erased. Keep it: we "
                  "destroy our copy of the salts once it is sent, so that nobody can link our public tombstones "
                  "to your data, and this receipt is then the only one."]
        if earlier:
            lines += ["(The salts of the tombstones we sent you before are in that earlier receipt.)"]
    return SubjectNotice(
        request=request, kind="outcome" if not earlier else f"outcome-{earlier + 1}", to=request.contact_email,
        subject_line=f"Your {request.get_type_display().lower()} request {request.pk}: "
                     f"{request.get_status_display().lower()}",
        body="\n".join(lines), receipt=receipt, sent_at=sent_at,
    )


def _erased_lines(items: list[RequestItem]) -> list[str]:
    records = Counter(i.outcome for i in items if i.kind == ItemKind.RECORD)
    derived = Counter(i.artifact_kind for i in items if i.kind == ItemKind.ARTIFACT
                      and i.outcome in (ItemOutcome.DELETED, ItemOutcome.LOGGED, ItemOutcome.NOTIFIED))
    lines = [f"Erased: {plural(records[ItemOutcome.DELETED] + records[ItemOutcome.GONE], 'record')} deleted, "
             f"{plural(records[ItemOutcome.REDACTED], 'record')} whose content was removed (the law requires us to "
             f"keep that they existed)."]
    if derived:
        lines.append("Copies derived from them, also erased: "
                     + ", ".join(plural(n, kind) for kind, n in sorted(derived.items())) + ".")
    return lines


def _recipients(items: dict[int, list[RequestItem]]) -> dict[str, dict[int, set[str]]]:
    """Who holds copies, per forget event, for all these requests' forgets: one query per log."""
    events = sorted({i.forget_event_id for rows in items.values() for i in rows if i.forget_event_id})
    found: dict[str, dict[int, set[str]]] = {"fleet": defaultdict(set), "archives": defaultdict(set)}
    if events:
        for event_id, holder in FleetCopyNotice.objects.filter(forget_event_id__in=events).values_list(
                "forget_event_id", "holder"):
            found["fleet"][event_id].add(holder)
        for event_id, holder in ArchiveDeletion.objects.filter(forget_event_id__in=events).values_list(
                "forget_event_id", "holder"):
            found["archives"][event_id].add(holder)
    return found


def _recipient_lines(items: list[RequestItem], recipients: dict[str, dict[int, set[str]]]) -> list[str]:
    """Art. 19: the recipients to whom the data was disclosed, each told of the erasure."""
    events = {i.forget_event_id for i in items if i.forget_event_id}
    fleet = sorted(set().union(*(recipients["fleet"].get(e, set()) for e in events)))
    archives = sorted(set().union(*(recipients["archives"].get(e, set()) for e in events)))
    if not fleet and not archives:
        return []
    lines = ["", "Recipients of your data, each told to erase it (GDPR Art. 19):"]
    lines += [f"- {holder} (a copy held by another agent; we track its acknowledgement)" for holder in fleet]
    lines += [f"- {holder or 'our archive'} (an archive; entered into the deletion log that every restore replays)"
              for holder in archives]
    return lines
