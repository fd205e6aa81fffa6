"""The append-only log: appends under the head row's lock, and signed checkpoints."""
from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import NamedTuple

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from memory.lookups import array_literal

from .. import merkle
from ..models import Checkpoint, KeyPurpose, LogHead, LogNode, SigningKey, Tombstone
from ..note import checkpoint_body, note_sign
from .keys import key_current, key_private
from .rows import RowWrites

HEAD_FIELDS = ["id", "size", "root", "frontier"]  # updated_at is left deferred: appends never read it


def frontier_split(frontier: bytes) -> list[bytes]:
    return [frontier[i:i + merkle.HASH_SIZE] for i in range(0, len(frontier), merkle.HASH_SIZE)]


class LockedLog(NamedTuple):
    head: LogHead
    issued: bool  # some of the `tombstone_ids` given to `log_lock` are stored already
    key_kid: str | None  # the kid of the current key for the `key_purpose` given, as seen under the lock
    key_id: int | None  # and its primary key
    tenants_found: int  # how many of the `tenant_ids` given exist (locked until the transaction ends)


def log_lock(*, tombstone_ids: Sequence[uuid.UUID | str] = (), key_purpose: str | None = None,
             tenant_ids: Collection[int] = ()) -> LockedLog:
    """Lock the log's head row: the caller's transaction holds it until it ends, so appends are
    serialized, indices are gapless, and a rolled-back forget leaves no trace in the log.

    In the same query (one round trip), also say whether any of `tombstone_ids` is stored already, which
    key is current for `key_purpose`, and how many of the (distinct) `tenant_ids` exist: read under the lock,
    all see everything every earlier append committed. The tenants' rows are locked `FOR KEY SHARE`, as a
    foreign-key check would lock them, so that none is deleted before this transaction ends (the tombstone's
    tenant has no database constraint: migration 0005).
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("the log is locked inside the caller's transaction")
    params: list = []
    postgresql = connection.vendor == "postgresql"
    issued = "1 = 0"
    if tombstone_ids and postgresql:  # one array literal: no quoting per id
        issued = f"EXISTS (SELECT 1 FROM {Tombstone._meta.db_table} WHERE id = ANY(%s::uuid[]))"
        params.append(array_literal(tombstone_ids))
    elif tombstone_ids:
        pk = Tombstone._meta.pk
        issued = (f"EXISTS (SELECT 1 FROM {Tombstone._meta.db_table} "
                  f"WHERE id IN ({', '.join(['%s'] * len(tombstone_ids))}))")
        params.extend(pk.get_db_prep_value(tombstone_id, connection) for tombstone_id in tombstone_ids)
    key = "NULL, NULL"
    if key_purpose is not None:
        current = f"FROM {SigningKey._meta.db_table} WHERE purpose = %s AND retired_at IS NULL"
        key = f"(SELECT kid {current}), (SELECT id {current})"
        params.extend([key_purpose, key_purpose])
    tenants = "0"
    if tenant_ids:
        tenant_ids = sorted(set(tenant_ids))
        tenant_table = Tombstone._meta.get_field("tenant").related_model._meta.db_table
        if postgresql:
            tenants = (f"(SELECT count(*) FROM (SELECT 1 FROM {tenant_table} WHERE id = ANY(%s::bigint[]) "
                       f"FOR KEY SHARE) AS locked)")
            params.append(tenant_ids)
        else:  # SQLite has no row locks: its writers are serialized by the database's own lock
            tenants = f"(SELECT count(*) FROM {tenant_table} WHERE id IN ({', '.join(['%s'] * len(tenant_ids))}))"
            params.extend(tenant_ids)
    sql = (f"SELECT size, root, frontier, {issued}, {key}, {tenants} FROM {LogHead._meta.db_table} WHERE id = 1"
           + (" FOR UPDATE" if connection.features.has_select_for_update else ""))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
        if row is None:  # a fresh database (or one flushed by a test run): the empty log
            LogHead.objects.get_or_create(pk=1, defaults={"root": merkle.EMPTY_ROOT, "updated_at": timezone.now()})
            cursor.execute(sql, params)
            row = cursor.fetchone()
    head = LogHead.from_db(connection.alias, HEAD_FIELDS, (1, *row[:3]))
    return LockedLog(head=head, issued=bool(row[3]), key_kid=row[4], key_id=row[5], tenants_found=row[6])


# A log node's binary COPY row: 3 fields, level (int2), node_index (int8), hash (bytea: its length, then it).
_NODE_ROW = struct.Struct(">hihiqi")


def _node_row_binary(row: tuple[int, int, bytes]) -> bytes:
    level, index, hash_ = row
    return _NODE_ROW.pack(3, 2, level, 8, index, len(hash_)) + hash_


def log_append(*, head: LogHead, leaf_hashes: list[bytes], writes: RowWrites | None = None,
               node_rows: Callable[[list[tuple]], Iterable[tuple]] | None = None,
               then: Callable[[], None] | None = None) -> int:
    """Append leaf hashes to the log whose head the caller locked (`log_lock`); return the first's index.

    O(log n) per leaf: the right edge is in the head row; only the nodes the new leaves complete are written,
    from level 1 up: a leaf's hash is not stored as a node, since the tombstone the caller writes at that
    index (same transaction) holds what it hashes (`selectors.nodes_stored` recomputes it from there). That
    is one row a tombstone instead of two.
    With `writes`, the nodes and the head's update are queued there (the caller sends them with its own
    rows, in one round trip when they are few); without, they are written now. `node_rows` wraps the node
    rows as they are written (the issuing path signs between them while a COPY streams them), and `then` runs
    once they are sent (`RowWrites.insert`).
    """
    first = head.size
    nodes, frontier = merkle.append_many(first, frontier_split(bytes(head.frontier)), leaf_hashes, with_leaves=False)
    send = writes is None
    writes = RowWrites() if send else writes
    writes.insert(model=LogNode, columns=["level", "node_index", "hash"],
                  rows=node_rows(nodes) if node_rows else nodes, count=len(nodes), encode=_node_row_binary, then=then)
    writes.execute(f"UPDATE {LogHead._meta.db_table} SET size = %s, frontier = %s, root = %s, updated_at = %s "
                   f"WHERE id = 1", [first + len(leaf_hashes), b"".join(frontier), merkle.fold(frontier),
                                     timezone.now()])
    if send:
        writes.send()
    return first


def checkpoint_sign() -> Checkpoint:
    """A signed checkpoint of the log as it is now; the stored one when the log has not grown since."""
    head = LogHead.objects.filter(pk=1).first()
    size, root = (head.size, bytes(head.root)) if head else (0, merkle.EMPTY_ROOT)
    existing = Checkpoint.objects.filter(tree_size=size).first()
    if existing is not None:
        return existing
    key = key_current(purpose=KeyPurpose.CHECKPOINT)
    now = timezone.now()
    body = checkpoint_body(origin=settings.LEDGER_LOG_ORIGIN, size=size, root=root, time=now)
    note = note_sign(body, name=key.note_name, public_key=bytes(key.public_key), sign=key_private(key).sign)
    try:
        with transaction.atomic():
            return Checkpoint.objects.create(tree_size=size, root=root, note=note, key=key, signed_at=now)
    except IntegrityError:  # signed concurrently by another request: the same size and root
        return Checkpoint.objects.get(tree_size=size)
