"""Issuing tombstones: validate, canonicalize and sign the statement, store it, append it to the log."""
from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import orjson
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from ..dsse import PAYLOAD_TYPE, pae
from ..errors import TombstoneError
from ..merkle import leaf_hash
from ..models import KeyPurpose, SigningKey, Tombstone, TombstoneSalts
from .keys import key_current, key_current_hint, key_private
from .log import log_append, log_lock
from .rows import INSERT_MAX_ROWS, JSONB_BINARY_VERSION, RowWrites
from .statement import salts_check, statement_payload

# A batch written by COPY signs under the log's lock, between the rows it streams: the server stores what it
# has received (on the other core, when one is free) while this process signs. The COPYs go nodes, salts,
# tombstones; each gets a share of the signatures to make while its rows stream, about in proportion to what
# its rows cost the server (measured, 1,000 tombstones: ~2 node rows 5 µs, a salts row 6 µs, a tombstone row
# 8 µs), so that no COPY's end waits long for the server to catch up. A tombstone row needs its own signature,
# so the tombstones' COPY makes whatever the first two left.
SIGNED_WITH_NODES = 0.25
SIGNED_WITH_SALTS = 0.25
# Of the nodes' and the salts' shares, the part signed once their last rows are sent (`RowWrites.insert(then=)`),
# while the server stores what it has: ~50 signatures, ~1.5 ms, more than the last chunk's rows cost it.
SIGNED_AFTER_ROWS = 0.2
SALT_ENTRY_BYTES = 48  # `"123456": "<32 hex>", ` in the salts JSON
_KEY_FIELD = Tombstone._meta.get_field("key")
TOMBSTONE_COLUMNS = ["id", "tenant_id", "payload_type", "payload", "signature", "key_id", "leaf_index", "created_at"]


@dataclass(frozen=True)
class TombstoneRequest:
    tombstone_id: uuid.UUID
    tenant_id: int
    statement: dict
    subject_salts: dict[str, str] | None = None


class IssuedTombstone(NamedTuple):
    """What `tombstones_issue_many` answers per request, in the requests' order: the handle a caller keeps.
    Not a model instance: building thousands of those cost ~0.2 signature each, and callers need only these
    (the stored tombstone is one `Tombstone.objects.get(pk=...)` away)."""

    tombstone_id: uuid.UUID
    leaf_index: int


class _Issued(NamedTuple):
    rows: list[tuple] | None  # the tombstone rows written (TOMBSTONE_COLUMNS), or None when issued before
    key: SigningKey | None
    stored: list[Tombstone] | None  # issued before: the stored tombstones, in the requests' order


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
    issued = _issue([request])
    return issued.stored[0] if issued.stored is not None else _tombstone(issued.rows[0], issued.key)


def tombstones_issue_many(*, requests: list[TombstoneRequest]) -> list[IssuedTombstone]:
    """`tombstone_issue` for many forgets at once (a sweep): one lock of the log head, set-based inserts.
    Answers each request's id and log index (`IssuedTombstone`), in the requests' order.

    Everything that can refuse (the statements, the salts) happens before the log's lock, but what only the
    database knows. Round trips under the lock: the lock itself (the same query checks that the signing key is
    still the current one, that the tenants exist and, for a few tombstones, that the ids are new), then the
    writes: one query for a few tombstones (nodes, head, tombstones and salts together; signed before the
    lock); binary COPYs for many (`rows.RowWrites`), signed while they stream (`SIGNED_WITH_NODES`), inside a
    savepoint that a reissued id rolls back. bench/README.md has the measurements.
    """
    issued = _issue(requests)
    if issued.stored is not None:
        return [IssuedTombstone(tombstone.pk, tombstone.leaf_index) for tombstone in issued.stored]
    return [IssuedTombstone(row[0], row[6]) for row in issued.rows]


def _issue(requests: list[TombstoneRequest]) -> _Issued:
    ids = [_uuid(request.tombstone_id) for request in requests]
    if len(set(ids)) != len(ids):
        raise TombstoneError("tombstone_conflict", "The same tombstone id twice in one call.", status_code=409)
    origin = settings.LEDGER_LOG_ORIGIN
    texts, payloads, messages, leaves, salt_rows = [], [], [], [], []
    for tombstone_id, request in zip(ids, requests):
        text = str(tombstone_id)  # once: for the statement and for the lock's query
        payload, records = statement_payload(tombstone_id=text, statement=request.statement, log_origin=origin)
        message = pae(PAYLOAD_TYPE, payload)
        texts.append(text)
        payloads.append(payload)
        messages.append(message)
        leaves.append(leaf_hash(message))
        salts = salts_check(request.subject_salts, records)
        if salts:
            salt_rows.append((tombstone_id, salts))
    count = len(requests)
    by_copy = count > INSERT_MAX_ROWS
    key = key_current_hint(purpose=KeyPurpose.TOMBSTONE)
    # A few tombstones go in one query, which cannot stream: they are signed now, outside the lock.
    signer = _Signer(key, messages)
    if not by_copy:
        signer.upto(count)
    tenant_ids = {int(request.tenant_id) for request in requests}
    with transaction.atomic(savepoint=False):  # the caller's transaction, or one of our own
        # The tombstone's tenant and key have no database constraints (migration 0005): they are checked here.
        # A batch written by COPY does not ask whether its ids are new: that costs the server an index probe
        # per id (~3 µs a tombstone, while this process waits), and the COPY's own insert into the primary
        # key index answers it anyway (below).
        head, issued, current_kid, current_key_id, tenants_found = log_lock(
            tombstone_ids=() if by_copy else texts, key_purpose=KeyPurpose.TOMBSTONE, tenant_ids=tenant_ids)
        if issued:  # checked under the lock: nothing is half-written, nothing to roll back
            return _Issued(None, None, _issued_already(ids, payloads))
        if tenants_found != len(tenant_ids):
            raise TombstoneError("tenant_not_found", "A tombstone names a tenant that does not exist.",
                                 {"tenant_ids": sorted(tenant_ids)}, status_code=400)
        if (current_kid, current_key_id) != (key.kid, key.pk):  # rotated since this process last looked:
            key = key_current(purpose=KeyPurpose.TOMBSTONE)  # sign (again) with the current key
            signer = _Signer(key, messages)
            if not by_copy:
                signer.upto(count)
        first, now, key_id, signatures = head.size, timezone.now(), key.pk, signer.signatures
        rows: list[tuple] = []

        def tombstone_rows():  # consumed by the COPY as it streams: what is signed here overlaps the storing
            sign, append = signer.sign, rows.append
            for offset, (tombstone_id, request, payload) in enumerate(zip(ids, requests, payloads)):
                if offset == len(signatures):  # signed in order: the next one, unless made already
                    signatures.append(sign(messages[offset]))
                row = (tombstone_id, int(request.tenant_id), PAYLOAD_TYPE, payload, signatures[offset], key_id,
                       first + offset, now)
                append(row)
                yield row

        writes = RowWrites()
        with_nodes, with_salts = count * SIGNED_WITH_NODES, count * (SIGNED_WITH_NODES + SIGNED_WITH_SALTS)
        log_append(head=head, leaf_hashes=leaves, writes=writes,
                   node_rows=lambda nodes: signer.during(nodes, with_nodes * (1 - SIGNED_AFTER_ROWS)),
                   then=lambda: signer.upto(with_nodes))
        writes.insert(model=TombstoneSalts, columns=["tombstone_id", "salts"],
                      rows=signer.during(salt_rows, with_salts - count * SIGNED_WITH_SALTS * SIGNED_AFTER_ROWS),
                      count=len(salt_rows), size=SALT_ENTRY_BYTES * sum(len(salts) for _id, salts in salt_rows),
                      encode=_salts_row_binary, then=lambda: signer.upto(with_salts))
        writes.insert(model=Tombstone, columns=TOMBSTONE_COLUMNS, rows=tombstone_rows(), count=count,
                      size=sum(map(len, payloads)))
        if not by_copy:
            writes.send()
            return _Issued(rows, key, None)
        # Some ids issued before show as a unique violation (salts' or tombstones' primary key): back to
        # before the writes, then the answer for ids issued before. A savepoint costs two short round trips.
        savepoint = transaction.savepoint()
        try:
            writes.send()
        except IntegrityError:
            transaction.savepoint_rollback(savepoint)
            if not Tombstone.objects.filter(pk__in=ids).exists():
                raise  # not a reissue: a genuine error
            return _Issued(None, None, _issued_already(ids, payloads))
        transaction.savepoint_commit(savepoint)
    return _Issued(rows, key, None)


class _Signer:
    """Signs a batch's messages in order, a few at a time, wherever the writing has a moment: `upto(n)`
    makes the first n signatures; `during(rows, n)` hands rows on, signing between them so that the first
    n signatures are made by the time the last row has gone."""

    def __init__(self, key: SigningKey, messages: list[bytes]):
        self.sign, self.messages, self.signatures = key_private(key).sign, messages, []

    def upto(self, count: float) -> None:
        signatures, messages, sign = self.signatures, self.messages, self.sign
        for index in range(len(signatures), min(int(count), len(messages))):
            signatures.append(sign(messages[index]))

    def during(self, rows: Iterable[tuple], count: float) -> Iterator[tuple]:
        rows = list(rows)
        start = len(self.signatures)
        every = len(rows) / (count - start) if count - start >= 1 else len(rows) + 1  # rows per signature
        due = every
        for index, row in enumerate(rows, 1):
            if index >= due:
                self.upto(start + index / every)
                due = (len(self.signatures) - start + 1) * every
            yield row
        self.upto(count)


# A salts row for binary COPY: 2 fields, tombstone_id (uuid, 16 bytes) and salts (jsonb: version byte + JSON).
_SALTS_ROW = struct.Struct(">hi16si")


def _salts_row_binary(row: tuple[uuid.UUID, dict[str, str]]) -> bytes:
    tombstone_id, salts = row
    data = JSONB_BINARY_VERSION + orjson.dumps(salts)
    return _SALTS_ROW.pack(2, 16, tombstone_id.bytes, len(data)) + data


def _uuid(value) -> uuid.UUID:
    return value if type(value) is uuid.UUID else uuid.UUID(str(value))


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
