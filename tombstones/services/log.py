"""The append-only log: appends under the head row's lock, and signed checkpoints."""
from __future__ import annotations

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, QuerySet
from django.utils import timezone

from .. import merkle
from ..models import Checkpoint, KeyPurpose, LogHead, LogNode
from ..note import checkpoint_body, note_sign
from .keys import key_current, key_private
from .rows import rows_insert


def frontier_split(frontier: bytes) -> list[bytes]:
    return [frontier[i:i + merkle.HASH_SIZE] for i in range(0, len(frontier), merkle.HASH_SIZE)]


def log_lock(*, exists: QuerySet | None = None) -> tuple[LogHead, bool]:
    """Lock the log's head row: the caller's transaction holds it until it ends, so appends are
    serialized, indices are gapless, and a rolled-back forget leaves no trace in the log.

    With `exists`, also say, in the same query, whether that queryset has rows: evaluated under the lock,
    it sees everything every earlier append committed.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("the log is locked inside the caller's transaction")
    locked = LogHead.objects.select_for_update().filter(pk=1)
    if exists is not None:
        locked = locked.annotate(found=Exists(exists))
    head = locked.first()
    if head is None:  # a fresh database (or one flushed by a test run): the empty log
        LogHead.objects.get_or_create(pk=1, defaults={"root": merkle.EMPTY_ROOT, "updated_at": timezone.now()})
        head = locked.get()
    return head, bool(getattr(head, "found", False))


def log_append(*, head: LogHead, leaf_hashes: list[bytes]) -> int:
    """Append leaf hashes to the log whose head the caller locked (`log_lock`); return the first's index.

    O(log n) per leaf: the right edge is in the head row; only the nodes the new leaves complete are written.
    """
    first = size = head.size
    frontier = frontier_split(bytes(head.frontier))
    nodes: list[tuple[int, int, bytes]] = []
    for leaf in leaf_hashes:
        created, frontier = merkle.append(size, frontier, leaf)
        nodes.extend(created)
        size += 1
    rows_insert(model=LogNode, columns=["level", "node_index", "hash"], rows=nodes)
    LogHead.objects.filter(pk=1).update(size=size, frontier=b"".join(frontier), root=merkle.fold(frontier),
                                        updated_at=timezone.now())
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
