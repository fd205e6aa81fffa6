"""The log's Merkle tree against a direct transcription of RFC 9162's recursive definitions."""
import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tombstones import merkle


def mth(leaves):
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return merkle.leaf_hash(leaves[0])
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return merkle.node_hash(mth(leaves[:k]), mth(leaves[k:]))


def path(m, leaves):
    if len(leaves) <= 1:
        return []
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    if m < k:
        return path(m, leaves[:k]) + [mth(leaves[k:])]
    return path(m - k, leaves[k:]) + [mth(leaves[:k])]


def subproof(m, leaves, complete):
    n = len(leaves)
    if m == n:
        return [] if complete else [mth(leaves)]
    k = 1 << ((n - 1).bit_length() - 1)
    if m <= k:
        return subproof(m, leaves[:k], complete) + [mth(leaves[k:])]
    return subproof(m - k, leaves[k:], False) + [mth(leaves[:k])]


def build(leaves):
    stored, frontier = {}, []
    for index, leaf in enumerate(leaves):
        created, frontier = merkle.append(index, frontier, merkle.leaf_hash(leaf))
        stored.update({(level, node): hash_ for level, node, hash_ in created})
    return stored, frontier


LEAVES = [b"entry %d" % i for i in range(70)]
STORED, _ = build(LEAVES)


def test_empty_tree_root_is_sha256_of_nothing():
    assert merkle.fold([]) == bytes.fromhex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")


def test_append_keeps_the_root_equal_to_the_recursive_definition_at_every_size():
    frontier = []
    for index, leaf in enumerate(LEAVES):
        created, frontier = merkle.append(index, frontier, merkle.leaf_hash(leaf))
        assert merkle.fold(frontier) == mth(LEAVES[:index + 1])
        assert len(created) == 1 + ((index + 1) & -(index + 1)).bit_length() - 1  # the leaf + completed parents


@pytest.mark.parametrize("size", range(1, 71))
def test_inclusion_proofs_from_stored_nodes_equal_rfc_path_and_verify(size):
    root = mth(LEAVES[:size])
    for index in range(size):
        proof = merkle.inclusion_proof(index, size, STORED)
        assert proof == path(index, LEAVES[:size])
        assert merkle.verify_inclusion(index, size, merkle.leaf_hash(LEAVES[index]), proof, root)
        assert not merkle.verify_inclusion(index, size, merkle.leaf_hash(b"other"), proof, root)


@pytest.mark.parametrize("size", range(1, 71))
def test_consistency_proofs_from_stored_nodes_equal_rfc_proof_and_verify(size):
    root = mth(LEAVES[:size])
    for first in range(1, size + 1):
        proof = merkle.consistency_proof(first, size, STORED)
        assert proof == subproof(first, LEAVES[:size], True)
        assert merkle.verify_consistency(first, size, mth(LEAVES[:first]), root, proof)


def test_proof_needs_only_logarithmically_many_stored_nodes():
    assert len(merkle.inclusion_nodes(123_456, 1_000_000)) <= 2 * 20
    assert len(merkle.consistency_nodes(333_333, 1_000_000)) <= 2 * 20


@given(st.integers(2, 300), st.data())
@settings(max_examples=60, deadline=None)
def test_a_proof_from_another_tree_does_not_verify(size, data):
    leaves = [b"x%d" % i for i in range(size)]
    other = list(leaves)
    changed = data.draw(st.integers(0, size - 1))
    other[changed] = b"forged"
    index = data.draw(st.integers(0, size - 1).filter(lambda i: i != changed))
    stored, _ = build(leaves)
    forged_stored, _ = build(other)
    forged_proof = merkle.inclusion_proof(index, size, forged_stored)
    assert not merkle.verify_inclusion(index, size, merkle.leaf_hash(leaves[index]), forged_proof, mth(leaves))
    first = data.draw(st.integers(1, size - 1))
    proof = merkle.consistency_proof(first, size, stored)
    assert merkle.verify_consistency(first, size, mth(leaves[:first]), mth(leaves), proof)
    if changed < first:  # the earlier tree was rewritten: nothing proves the new one extends it
        assert not merkle.verify_consistency(first, size, mth(other[:first]), mth(leaves), proof)
        assert not merkle.verify_consistency(first, size, mth(leaves[:first]), mth(other), proof)


@pytest.mark.parametrize("first, second, proof", [
    (5, 3, [b"\0" * 32]), (3, 5, []), (0, 5, [b"\0" * 32]), (4, 4, [b"\0" * 32]),
])
def test_degenerate_consistency_proofs_are_refused(first, second, proof):
    assert not merkle.verify_consistency(first, second, mth(LEAVES[:max(first, 0)]), mth(LEAVES[:second]), proof)


def test_inclusion_outside_the_tree_is_refused():
    assert not merkle.verify_inclusion(5, 5, merkle.leaf_hash(LEAVES[0]), [], mth(LEAVES[:5]))


@given(st.integers(0, 40), st.lists(st.integers(0, 12), max_size=6))
def test_appending_in_batches_writes_the_same_nodes_and_frontier_as_one_by_one(start, batches):
    """`append_many` (what an issue of many tombstones uses) against `append` leaf by leaf."""
    hashes = [merkle.leaf_hash(leaf) for leaf in LEAVES]
    one_by_one, frontier = [], []
    for index, leaf in enumerate(hashes[:start]):
        _, frontier = merkle.append(index, frontier, leaf)
    batched_frontier, size = list(frontier), start
    batched = []
    for count in batches:
        chunk = hashes[size:size + count]
        for offset, leaf in enumerate(chunk):
            created, frontier = merkle.append(size + offset, frontier, leaf)
            one_by_one.extend(created)
        created, batched_frontier = merkle.append_many(size, batched_frontier, chunk)
        batched.extend(created)
        size += len(chunk)
    assert batched == one_by_one and batched_frontier == frontier
    assert merkle.fold(batched_frontier) == mth(LEAVES[:size])
