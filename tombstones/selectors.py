"""Reads: the published keys, tombstones and their envelopes, and proofs from the stored tree."""
from __future__ import annotations

import uuid

from django.db import connection
from django.db.models import CharField, IntegerField, Value

from memory.lookups import array_literal

from . import merkle
from .dsse import envelope_build, pae
from .errors import TombstoneError
from .jwk import PublicKey, jwk_build, jwks_parse
from .models import LogHead, LogNode, SigningKey, Tombstone


def jwks_document() -> dict:
    """Every public key ever used, current and retired, with its validity: the JWKS we publish."""
    keys = SigningKey.objects.order_by("created_at", "id").only(
        "kid", "purpose", "public_key", "note_name", "created_at", "retired_at", "compromised_at")
    return {"keys": [
        jwk_build(raw=bytes(key.public_key), purpose=key.purpose, valid_from=key.created_at,
                  valid_until=key.retired_at, compromised_at=key.compromised_at, note_name=key.note_name or None)
        for key in keys
    ]}


def keys_published() -> dict[str, PublicKey]:
    """The published keys as verifiers see them (parsed from the JWKS, so the server trusts the same data)."""
    return jwks_parse(jwks_document())


def tombstone_get(*, tombstone_id: uuid.UUID | str) -> Tombstone:
    try:
        tombstone_id = uuid.UUID(str(tombstone_id))
    except ValueError:
        tombstone = None
    else:
        tombstone = Tombstone.objects.select_related("key").filter(pk=tombstone_id).first()
    if tombstone is None:
        raise TombstoneError("tombstone_not_found", "No tombstone with this id.", status_code=404)
    return tombstone


def envelope_of(tombstone: Tombstone) -> dict:
    return envelope_build(payload=bytes(tombstone.payload), payload_type=tombstone.payload_type,
                          keyid=tombstone.key.kid, signature=bytes(tombstone.signature))


def log_size() -> int:
    head = LogHead.objects.filter(pk=1).only("size").first()
    return head.size if head else 0


# The nodes of `nodes_stored` on PostgreSQL, in one statement the ORM would spell as an OR of (level, index) pairs
# (a receipt batch asks for ~2,000 nodes: ~2 ms to compile, in bench_workflow.py): the pairs as two arrays.
_NODES_SQL = f"""
    SELECT n.level, n.node_index, n.hash, '' FROM {LogNode._meta.db_table} n
    JOIN unnest(%s::int[], %s::bigint[]) AS v(level, node_index) ON n.level = v.level AND n.node_index = v.node_index
    UNION ALL
    SELECT 0, t.leaf_index, t.payload, t.payload_type FROM {Tombstone._meta.db_table} t
    WHERE t.leaf_index = ANY(%s::bigint[])
"""


def nodes_stored(nodes: set[merkle.Node]) -> dict[merkle.Node, bytes]:
    """The hashes of these log nodes, in one query (proofs and receipts read them): levels 1 and up as stored
    (`LogNode`); a leaf's (level 0) hashed here from its tombstone, whose DSSE PAE is the log's leaf (the
    issuer stores no level-0 nodes: `log_append`). A proof needs at most one or two leaves."""
    if not nodes:
        return {}
    inner = sorted(node for node in nodes if node[0])
    leaf_indexes = sorted(index for level, index in nodes if not level)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_NODES_SQL, [array_literal(level for level, _index in inner),
                                        array_literal(index for _level, index in inner), array_literal(leaf_indexes)])
            rows = cursor.fetchall()
    else:
        rows = LogNode.objects.filter(pk__in=inner).values_list(
            "level", "node_index", "hash", Value("", output_field=CharField())).union(
            Tombstone.objects.filter(leaf_index__in=leaf_indexes).values_list(
                Value(0, output_field=IntegerField()), "leaf_index", "payload", "payload_type"), all=True)
    hashes = {}
    for level, index, data, payload_type in rows:
        hashes[(level, index)] = bytes(data) if level else merkle.leaf_hash(pae(payload_type, bytes(data)))
    return hashes


def _check_size(size: int, name: str) -> None:
    if size > log_size():
        raise TombstoneError("tree_size_out_of_range", f"The log has not reached {size} entries.",
                             {"parameter": name})


def inclusion_proof_get(*, leaf_index: int, tree_size: int) -> list[bytes]:
    """PATH(leaf_index, D[0:tree_size]) from O(log n) stored hashes, in one query."""
    _check_size(tree_size, "tree_size")
    if not 0 <= leaf_index < tree_size:
        raise TombstoneError("invalid_parameter", "The leaf is not in a tree of that size.", {"parameter": "tree_size"})
    return merkle.inclusion_proof(leaf_index, tree_size, nodes_stored(merkle.inclusion_nodes(leaf_index, tree_size)))


def consistency_proof_get(*, first: int, second: int) -> list[bytes]:
    """PROOF(first, D[0:second]) from O(log n) stored hashes, in one query."""
    _check_size(second, "second")
    if not 0 < first <= second:
        raise TombstoneError("invalid_parameter", "A consistency proof needs 0 < first <= second.",
                             {"parameter": "first"})
    return merkle.consistency_proof(first, second, nodes_stored(merkle.consistency_nodes(first, second)))


def log_root_at(*, tree_size: int) -> bytes:
    _check_size(tree_size, "tree_size")
    return merkle.range_hash(0, tree_size, nodes_stored(set(merkle.root_nodes(tree_size))))
