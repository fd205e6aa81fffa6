"""Issuing tombstones: validate, canonicalize and sign the statement, store it, append it to the log."""
from __future__ import annotations

import atexit
import logging
import os
import struct
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from ..dsse import PAYLOAD_TYPE, pae
from ..errors import TombstoneError
from ..merkle import leaf_hash
from ..models import KeyPurpose, SigningKey, Tombstone, TombstoneSalts
from ..signing_process import SigningProcess, SigningProcessError
from .keys import key_current, key_current_hint, key_private
from .log import log_append, log_lock
from .rows import INSERT_MAX_ROWS, JSONB_BINARY_VERSION, RowWrites
from .statement import salts_check, statement_payload

logger = logging.getLogger(__name__)

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
# A batch of this many tombstones or more is signed by the signing process (`tombstones.signing_process`), on
# the other core, while this process checks, stores and appends; sent SUBMIT_EVERY messages a frame (a write
# each, ~32 kB), its answers read every TAKE_EVERY rows written. Smaller batches sign here: starting their
# signatures elsewhere saves less than it costs to wait for them.
SIGNING_PROCESS_MIN = 64
SUBMIT_EVERY = 32
TAKE_EVERY = 128
SIGNING_PROCESS_RETRY_SECONDS = 60
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
    savepoint that a reissued id rolls back. From SIGNING_PROCESS_MIN tombstones on, the signing process
    (`tombstones.signing_process`) signs them on another core from the first statement checked on, and the
    COPYs only take its signatures. bench/README.md has the measurements.
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
    count = len(requests)
    by_copy = count > INSERT_MAX_ROWS
    key = key_current_hint(purpose=KeyPurpose.TOMBSTONE)
    texts, payloads, messages, leaves, salt_rows = [], [], [], [], []
    # A large batch is signed by the signing process as its messages are made (`_Signer.offer`).
    signer = _Signer(key, messages, leaves, remote=count >= SIGNING_PROCESS_MIN)
    try:
        for tombstone_id, request in zip(ids, requests):
            text = str(tombstone_id)  # once: for the statement and for the lock's query
            payload, records = statement_payload(tombstone_id=text, statement=request.statement, log_origin=origin)
            message = pae(PAYLOAD_TYPE, payload)
            texts.append(text)
            payloads.append(payload)
            messages.append(message)
            leaves.append(leaf_hash(message))
            signer.offer()
            salts = salts_check(request.subject_salts, records)
            if salts:
                salt_rows.append((tombstone_id, salts))
        signer.offer(everything=True)
        # A few tombstones go in one query, which cannot stream: they are signed now, outside the lock.
        if not by_copy:
            signer.upto(count)
        return _issue_signed(requests, ids, texts, payloads, leaves, salt_rows, key, signer, by_copy)
    finally:
        signer.finish()


def _issue_signed(requests: list[TombstoneRequest], ids: list[uuid.UUID], texts: list[str], payloads: list[bytes],
                  leaves: list[bytes], salt_rows: list[tuple], key: SigningKey, signer: _Signer,
                  by_copy: bool) -> _Issued:
    """`_issue` once the statements are checked and their signing has begun: the lock, the writes."""
    count = len(requests)
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
            key = key_current(purpose=KeyPurpose.TOMBSTONE)  # sign (again) with the current key, here
            signer.restart(key)
            if not by_copy:
                signer.upto(count)
        first, now, key_id, signatures = head.size, timezone.now(), key.pk, signer.signatures
        rows: list[tuple] = []

        def tombstone_rows():  # consumed by the COPY as it streams: what is signed here overlaps the storing
            upto, append = signer.upto, rows.append
            for offset, (tombstone_id, request, payload) in enumerate(zip(ids, requests, payloads)):
                if offset == len(signatures):  # signed in order: the next one, unless made already
                    upto(offset + 1)
                row = (tombstone_id, int(request.tenant_id), PAYLOAD_TYPE, payload, signatures[offset], key_id,
                       first + offset, now)
                append(row)
                yield row

        writes = RowWrites()
        with_nodes, with_salts = count * SIGNED_WITH_NODES, count * (SIGNED_WITH_NODES + SIGNED_WITH_SALTS)
        log_append(head=head, leaf_hashes=leaves, writes=writes,
                   node_rows=lambda nodes: signer.during(nodes, with_nodes * (1 - SIGNED_AFTER_ROWS)),
                   then=lambda: signer.ahead(with_nodes))
        writes.insert(model=TombstoneSalts, columns=["tombstone_id", "salts"],
                      rows=signer.during(salt_rows, with_salts - count * SIGNED_WITH_SALTS * SIGNED_AFTER_ROWS),
                      count=len(salt_rows), size=SALT_ENTRY_BYTES * sum(len(salts) for _id, salts in salt_rows),
                      encode=_salts_row_binary, then=lambda: signer.ahead(with_salts))
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
    n signatures are made by the time the last row has gone.

    With `remote`, the signing process (`tombstones.signing_process`) signs them instead, on the other core:
    `offer()` sends it the messages made so far, a frame of SUBMIT_EVERY at a time, and `upto(n)` takes its
    signatures (waiting only when it is behind). If it fails, what it has not answered is signed here; the
    bytes are the same either way (Ed25519 is deterministic)."""

    def __init__(self, key: SigningKey, messages: list[bytes], leaves: list[bytes], *, remote: bool = False):
        self.messages, self.leaves, self.signatures = messages, leaves, []
        self._start(key, remote)

    def _start(self, key: SigningKey, remote: bool) -> None:
        private = key_private(key)
        self.sign, self.public_key = private.sign, private.public_key()
        self.remote = signing_process_acquire(private, bytes(key.public_key)) if remote else None
        self.holds = self.remote is not None  # the signing process's lock, until `finish`
        self.submitted = len(self.signatures)  # messages sent to the process
        self.verified = False

    def offer(self, *, everything: bool = False) -> None:
        """Send the signing process the messages made since the last frame (a frame's worth, or all)."""
        if self.remote is None or not (everything or len(self.messages) - self.submitted >= SUBMIT_EVERY):
            return
        end = len(self.messages)
        if end > self.submitted:
            self._remote(self.remote.submit, self.messages[self.submitted:end], self.leaves[self.submitted:end])
            self.submitted = end

    def upto(self, count: float) -> None:
        signatures, messages = self.signatures, self.messages
        count = min(int(count), len(messages))
        if self.remote is not None and count > len(signatures):
            self.offer(everything=True)
            self._take(count - len(signatures))
        sign = self.sign
        for index in range(len(signatures), count):
            signatures.append(sign(messages[index]))

    def ahead(self, count: float) -> None:
        """`upto(count)` while the server stores what it was sent; with the process, only take what it has
        made (the signatures are needed with the tombstone rows, not before)."""
        if self.remote is not None:
            self._take(0)
        else:
            self.upto(count)

    def during(self, rows: Iterable[tuple], count: float) -> Iterator[tuple]:
        if self.remote is not None:  # the process signs meanwhile: only take what it has made
            for index, row in enumerate(rows, 1):
                if index % TAKE_EVERY == 0:
                    self._take(0)
                yield row
            return
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

    def restart(self, key: SigningKey) -> None:
        """Sign with another key from here on (a rotation seen under the log's lock), in this process."""
        self.finish()
        self.signatures.clear()
        self._start(key, remote=False)

    def finish(self) -> None:
        """Leave the signing process with nothing pending (its answers to a batch that stopped are dropped),
        and to the next batch."""
        remote, self.remote = self.remote, None
        if remote is not None and remote.pending:
            try:
                remote.take(remote.pending)
            except SigningProcessError as exc:
                _signing_process_lost(remote, str(exc))
        if self.holds:
            self.holds = False
            signing_process_release()

    def _take(self, needed: int) -> None:
        """Take at least `needed` signatures from the process, and what else it has answered already."""
        remote = self.remote
        if remote is None:
            return
        count = max(needed, self._remote(remote.available) or 0)
        if not count or self.remote is None:
            return
        taken = self._remote(remote.take, count)
        if taken is None:
            return
        if not self.verified:  # the first of each batch, before anything is written with it
            try:
                self.public_key.verify(taken[0], self.messages[len(self.signatures)])
            except InvalidSignature:
                _signing_process_lost(remote, "its signature does not verify")
                self.remote = None
                return
            self.verified = True
        self.signatures += taken

    def _remote(self, method, *args):
        """Call the process; on failure, stop using it (what it has not answered is signed here)."""
        try:
            return method(*args)
        except SigningProcessError as exc:
            _signing_process_lost(self.remote, str(exc))
            self.remote = None
            return None


_signing: SigningProcess | None = None  # this process's signing process, started by the first large batch
_signing_retry_at = 0.0  # after a failure, when to try starting one again (monotonic clock)
# Held by the batch that uses the signing process, from its first message to `_Signer.finish`: one batch's
# frames at a time (threads of one process issue batches too: a web server's, Celery's threads pool). A
# batch that finds it held signs here.
_signing_lock = threading.Lock()


def signing_process_acquire(private: Ed25519PrivateKey, public: bytes) -> SigningProcess | None:
    """This process's signing process, holding `private`, for one batch until `signing_process_release`;
    None when switched off (LEDGER_TOMBSTONE_SIGNING_PROCESS), in use by another thread, or unavailable (then
    the batch is signed here)."""
    if not settings.LEDGER_TOMBSTONE_SIGNING_PROCESS or not _signing_lock.acquire(blocking=False):
        return None
    try:
        remote = _signing_process_keyed(private, public)
    except BaseException:
        _signing_lock.release()
        raise
    if remote is None:
        _signing_lock.release()
    return remote


def _signing_process_keyed(private: Ed25519PrivateKey, public: bytes) -> SigningProcess | None:
    global _signing
    if _signing is not None and _signing.pid_owner != os.getpid():
        _signing = None  # a fork's copy of its parent's handle: the child process is the parent's to use
    if _signing is None and time.monotonic() >= _signing_retry_at:
        try:
            _signing = SigningProcess()
        except OSError as exc:
            _signing_process_lost(None, f"could not start ({exc})")
        else:
            atexit.register(_signing_process_close, _signing)
    if _signing is not None:
        try:
            _signing.key(private.private_bytes_raw(), public)
        except SigningProcessError as exc:
            _signing_process_lost(_signing, str(exc))
    return _signing


def _signing_after_fork() -> None:
    """In a forked child: the parent's signing process and lock are the parent's (a thread of the parent may
    have held the lock at the fork, and would never release it here)."""
    global _signing, _signing_lock
    _signing, _signing_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_signing_after_fork)


def signing_process_release() -> None:
    _signing_lock.release()


def signing_process_warm(key: SigningKey) -> None:
    """Start the signing process now, holding `key` (a worker at start-up), not in the first batch."""
    private = key_private(key)
    if signing_process_acquire(private, bytes(key.public_key)) is not None:
        signing_process_release()


def _signing_process_close(remote: SigningProcess) -> None:
    """At exit: close this process's own signing process (its input ends, it exits)."""
    if remote.pid_owner == os.getpid():
        remote.close()


def _signing_process_lost(remote: SigningProcess | None, why: str = "failed") -> None:
    """Stop using a signing process that failed; try a new one after SIGNING_PROCESS_RETRY_SECONDS."""
    global _signing, _signing_retry_at
    logger.warning("tombstone signing process: %s; signing in this process for %s s", why,
                   SIGNING_PROCESS_RETRY_SECONDS)
    if remote is not None:
        remote.close()
    if _signing is remote:
        _signing = None
    _signing_retry_at = time.monotonic() + SIGNING_PROCESS_RETRY_SECONDS


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
