"""Issuing tombstones: validate, canonicalize and sign the statement, store it, append it to the log."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from ..dsse import PAYLOAD_TYPE, pae
from ..errors import TombstoneError
from ..merkle import leaf_hash
from ..models import KeyPurpose, SigningKey, Tombstone, TombstoneSalts
from .keys import key_current, key_current_hint, key_private
from .log import log_append, log_lock
from .rows import INSERT_MAX_ROWS, RowWrites
from .statement import salts_check, statement_bytes, statement_complete


# The share of a batch's signatures made under the log's lock, while the COPY streams the rows already signed
# (batches written by COPY only: see `tombstones_issue_many`). A tombstone's insert on the server costs about
# half a signature, so half keeps the server busy for as long as this process signs, and no longer.
SIGNED_UNDER_LOCK = 0.5
SALT_ENTRY_BYTES = 48  # `"123456": "<32 hex>", ` in the salts JSON
_KEY_FIELD = Tombstone._meta.get_field("key")
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
    """`tombstone_issue` for many forgets at once (a sweep): one lock of the log head, set-based inserts.

    Everything that can refuse (the statements, the salts) happens before the log's lock, and so does the
    signing of a small batch. Round trips under the lock: the lock itself (the same query checks that the
    ids are new and that the signing key is still the current one), then the writes: one query for a single
    tombstone (nodes, head, tombstone and salts together), binary COPYs for many (`rows.RowWrites`).

    A batch written by COPY signs its first half before the lock and its second half while the COPY streams
    the first half's rows: the server stores them (on the other core, when there is one free) while this
    process signs, and the lock is held about as long as if everything had been signed first (a tombstone's
    insert on the server costs roughly half a signature). bench/README.md has the measurements.
    """
    ids = [_uuid(request.tombstone_id) for request in requests]
    if len(set(ids)) != len(ids):
        raise TombstoneError("tombstone_conflict", "The same tombstone id twice in one call.", status_code=409)
    origin = settings.LEDGER_LOG_ORIGIN
    payloads, messages, leaves, salt_rows = [], [], [], []
    for tombstone_id, request in zip(ids, requests):
        statement, records = statement_complete(tombstone_id=tombstone_id, statement=request.statement,
                                                log_origin=origin)
        payload = statement_bytes(statement)
        message = pae(PAYLOAD_TYPE, payload)
        payloads.append(payload)
        messages.append(message)
        leaves.append(leaf_hash(message))
        salts = salts_check(request.subject_salts, records)
        if salts:
            salt_rows.append((tombstone_id, salts))
    count = len(requests)
    presigned = count if count <= INSERT_MAX_ROWS else count - int(count * SIGNED_UNDER_LOCK)
    key = key_current_hint(purpose=KeyPurpose.TOMBSTONE)
    signatures = _sign(key, messages[:presigned])
    with transaction.atomic(savepoint=False):  # the caller's transaction, or one of our own
        head, issued, current_kid = log_lock(tombstone_ids=ids, key_purpose=KeyPurpose.TOMBSTONE)
        if issued:  # checked under the lock: nothing is half-written, nothing to roll back
            return _issued_already(ids, payloads)
        if current_kid != key.kid:  # rotated since this process last looked: sign again with the current key
            key = key_current(purpose=KeyPurpose.TOMBSTONE)
            signatures = _sign(key, messages[:presigned])
        sign, first, now = key_private(key).sign, head.size, timezone.now()
        rows: list[tuple] = []

        def tombstone_rows():  # consumed by the COPY as it streams: what is signed here overlaps the storing
            for offset, (tombstone_id, request, payload) in enumerate(zip(ids, requests, payloads)):
                signature = signatures[offset] if offset < presigned else sign(messages[offset])
                rows.append((tombstone_id, int(request.tenant_id), PAYLOAD_TYPE, payload, signature, key.pk,
                             first + offset, now))
                yield rows[-1]

        writes = RowWrites()
        writes.insert(model=Tombstone, columns=TOMBSTONE_COLUMNS, rows=tombstone_rows(), count=count,
                      size=sum(map(len, payloads)))
        log_append(head=head, leaf_hashes=leaves, writes=writes)
        writes.insert(model=TombstoneSalts, columns=["tombstone_id", "salts"], rows=salt_rows,
                      size=SALT_ENTRY_BYTES * sum(len(salts) for _id, salts in salt_rows))
        writes.send()
    return [_tombstone(row, key) for row in rows]


def _uuid(value) -> uuid.UUID:
    return value if type(value) is uuid.UUID else uuid.UUID(str(value))


def _sign(key: SigningKey, messages: list[bytes]) -> list[bytes]:
    sign = key_private(key).sign
    return [sign(message) for message in messages]


def _tombstone(row: tuple, key: SigningKey) -> Tombstone:
    tombstone = Tombstone.from_db(connection.alias, TOMBSTONE_COLUMNS, row)  # every column, in field order
    _KEY_FIELD.set_cached_value(tombstone, key)  # what `tombstone.key = key` does, minus the checks: key_id is set
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
