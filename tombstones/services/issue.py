"""Issuing tombstones: validate, canonicalize and sign the statement, store it, append it to the log."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .. import merkle
from ..dsse import PAYLOAD_TYPE, pae
from ..errors import TombstoneError
from ..models import KeyPurpose, Tombstone, TombstoneSalts
from .keys import key_current, key_private
from .log import log_append, log_lock
from .rows import rows_insert
from .statement import salts_check, statement_bytes, statement_complete


TOMBSTONE_COLUMNS = ["id", "tenant_id", "payload_type", "payload", "signature", "key_id", "leaf_index", "created_at"]


@dataclass(frozen=True)
class TombstoneRequest:
    tombstone_id: uuid.UUID
    tenant_id: int
    statement: dict
    subject_salts: dict[str, str] | None = None


def tombstone_issue(*, tombstone_id: uuid.UUID, tenant_id: int, statement: dict,
                    subject_salts: dict[str, str] | None = None) -> Tombstone:
    """Sign a forget's statement, store it and append it to the log, inside the caller's transaction.

    Call it before the forget's first destructive statement: if the forget rolls back, so does the
    tombstone and its log entry. `subject_salts` (record id -> salt) are kept apart from the public
    statement, for the subject's receipt. Issuing the same id again returns the stored tombstone when the
    statement is the same, and raises `tombstone_conflict` when it is not.
    """
    request = TombstoneRequest(tombstone_id=tombstone_id, tenant_id=tenant_id, statement=statement,
                               subject_salts=subject_salts)
    return tombstones_issue_many(requests=[request])[0]


def tombstones_issue_many(*, requests: list[TombstoneRequest]) -> list[Tombstone]:
    """`tombstone_issue` for many forgets at once (a sweep): one lock of the log head, set-based inserts."""
    if len({str(request.tombstone_id) for request in requests}) != len(requests):
        raise TombstoneError("tombstone_conflict", "The same tombstone id twice in one call.", status_code=409)
    origin = settings.LEDGER_LOG_ORIGIN
    key = key_current(purpose=KeyPurpose.TOMBSTONE)
    sign = key_private(key).sign
    signed_rows, salt_rows, leaves = [], [], []
    for request in requests:  # validate, canonicalize and sign before taking the log's lock
        statement, records = statement_complete(tombstone_id=request.tombstone_id, statement=request.statement,
                                                log_origin=origin)
        payload = statement_bytes(statement)
        signed = pae(PAYLOAD_TYPE, payload)
        signed_rows.append((request.tombstone_id, request.tenant_id, PAYLOAD_TYPE, payload, sign(signed), key.pk))
        leaves.append(merkle.leaf_hash(signed))
        salts = salts_check(request.subject_salts, records)
        if salts:
            salt_rows.append((request.tombstone_id, salts))
    ids = [row[0] for row in signed_rows]
    with transaction.atomic(savepoint=False):  # the caller's transaction, or one of our own
        head, issued = log_lock(exists=Tombstone.objects.filter(pk__in=ids))
        if issued:  # checked under the lock: nothing is half-written, nothing to roll back
            return _issued_already(ids, [row[3] for row in signed_rows])
        first, now = log_append(head=head, leaf_hashes=leaves), timezone.now()
        rows = [(*row, first + offset, now) for offset, row in enumerate(signed_rows)]
        rows_insert(model=Tombstone, columns=TOMBSTONE_COLUMNS, rows=rows)
        rows_insert(model=TombstoneSalts, columns=["tombstone_id", "salts"], rows=salt_rows)
    return [_tombstone(row, key) for row in rows]


def _tombstone(row: tuple, key) -> Tombstone:
    tombstone = Tombstone(**dict(zip(TOMBSTONE_COLUMNS, row)))
    tombstone.key = key
    return tombstone


def _issued_already(ids: list[uuid.UUID], payloads: list[bytes]) -> list[Tombstone]:
    """Ids issued before: the stored tombstones if every statement is the same, else `tombstone_conflict`."""
    stored = Tombstone.objects.in_bulk(ids)
    for tombstone_id, payload in zip(ids, payloads):
        existing = stored.get(tombstone_id)
        if existing is None:
            raise TombstoneError("tombstone_conflict", "Some of these tombstones were issued before and some not.",
                                 status_code=409)
        if bytes(existing.payload) != payload:
            raise TombstoneError("tombstone_conflict", f"Tombstone {tombstone_id} exists with another statement.",
                                 {"tombstone_id": str(tombstone_id)}, status_code=409)
    return [stored[tombstone_id] for tombstone_id in ids]
