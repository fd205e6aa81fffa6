"""Signing keys, tombstones, and the append-only log (RFC 9162 Merkle tree) they go into.

Permanence is the database's job: migration 0002 installs triggers that refuse UPDATE and DELETE of
tombstones, log nodes, checkpoints and key events, refuse DELETE of keys and any UPDATE of a key's
identity, and refuse to shrink the log head. Nothing here decides anything: see `tombstones.services`.
"""
from __future__ import annotations

from django.db import models
from django.db.models import Q

from .jwk import PURPOSE_CHECKPOINT, PURPOSE_TOMBSTONE


class KeyPurpose(models.TextChoices):
    TOMBSTONE = PURPOSE_TOMBSTONE
    CHECKPOINT = PURPOSE_CHECKPOINT


class SigningKey(models.Model):
    """An Ed25519 key. The private half is PKCS#8, encrypted with the signing passphrase; it is never shown.

    Valid from `created_at`; `retired_at` ends its use for signing (it keeps verifying what it signed);
    `compromised_at` says from when its signatures can no longer be trusted.
    """

    kid = models.CharField(max_length=64, unique=True)
    purpose = models.CharField(max_length=10, choices=KeyPurpose.choices)
    public_key = models.BinaryField()
    private_key_encrypted = models.BinaryField(editable=False)
    note_name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField()
    retired_at = models.DateTimeField(null=True, blank=True)
    compromised_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["purpose"], condition=Q(retired_at__isnull=True),
                                    name="signingkey_one_current_per_purpose"),
        ]

    def __str__(self) -> str:
        return f"{self.purpose} key {self.kid[:12]}…"


class KeyAction(models.TextChoices):
    CREATED = "created"
    RETIRED = "retired"
    COMPROMISED = "compromised"


class KeyEvent(models.Model):
    """Append-only history of the keys: who created, retired or reported a key compromised, and when."""

    key = models.ForeignKey(SigningKey, on_delete=models.PROTECT, related_name="events")
    action = models.CharField(max_length=12, choices=KeyAction.choices)
    actor = models.CharField(max_length=200)
    at = models.DateTimeField()
    detail = models.JSONField(default=dict, blank=True)


class LogHead(models.Model):
    """The single row that serializes appends (`select_for_update`) and holds the tree's right edge.

    `frontier` is the concatenated hashes of the perfect subtrees that make the tree, largest first
    (their positions follow from `size`), so an append reads nothing else.
    """

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    size = models.BigIntegerField(default=0)
    root = models.BinaryField()
    frontier = models.BinaryField(default=b"")
    updated_at = models.DateTimeField()


class LogNode(models.Model):
    """The hash of one complete perfect subtree: leaves [node_index * 2**level, (node_index + 1) * 2**level).

    Levels 1 and up. A leaf's hash (level 0) is its tombstone's, `leaf_hash(pae(payload_type, payload))` of
    the tombstone at that `leaf_index`, and is computed from there (`selectors.nodes_stored`); logs written
    before that still hold level-0 rows, which nothing reads."""

    pk = models.CompositePrimaryKey("level", "node_index")
    level = models.PositiveSmallIntegerField()
    node_index = models.BigIntegerField()
    hash = models.BinaryField()


class Tombstone(models.Model):
    """A signed statement of one forget: the DSSE payload as signed, its signature, and its log position.

    The leaf in the log is the DSSE pre-authentication encoding of (`payload_type`, `payload`).
    """

    id = models.UUIDField(primary_key=True)
    # No single-column indexes on the foreign keys: (tenant, created_at) below serves the tenant, and keys
    # are never deleted (a trigger refuses it), so nothing looks tombstones up by key. Fewer indexes, faster appends.
    # No database constraints either (`db_constraint=False`): the issuer checks both under the log's lock, and
    # triggers refuse to delete or renumber what a tombstone names; migration 0005 says why that is enough.
    tenant = models.ForeignKey("memory.Tenant", on_delete=models.PROTECT, related_name="tombstones", db_index=False,
                               db_constraint=False)
    payload_type = models.CharField(max_length=100)
    payload = models.BinaryField()
    signature = models.BinaryField()
    key = models.ForeignKey(SigningKey, on_delete=models.PROTECT, related_name="tombstones", db_index=False,
                            db_constraint=False)
    leaf_index = models.BigIntegerField(unique=True)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["tenant", "created_at"], name="tombstone_tenant_created_idx")]

    def __str__(self) -> str:
        return f"tombstone {self.id}"


class TombstoneSalts(models.Model):
    """The records' commitment salts (record id -> salt): private, never in the statement; they go only into
    the subject's receipt. One row per tombstone."""

    # Written only with its tombstone, in the same transaction; no database constraint (migration 0005).
    tombstone = models.OneToOneField(Tombstone, on_delete=models.PROTECT, primary_key=True, related_name="salts",
                                     db_constraint=False)
    salts = models.JSONField()


class Checkpoint(models.Model):
    """A signed head of the log (a C2SP signed note), kept so that receipts prove the earliest one."""

    tree_size = models.BigIntegerField(unique=True)
    root = models.BinaryField()
    note = models.TextField()
    key = models.ForeignKey(SigningKey, on_delete=models.PROTECT, related_name="checkpoints")
    signed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"checkpoint at {self.tree_size}"
