"""The RFC 9162 (Certificate Transparency v2) Merkle tree, pure: no Django.

Leaf hash `SHA-256(0x00 || leaf)`, node hash `SHA-256(0x01 || left || right)`. The log stores the hash of
every *perfect* subtree once it is complete, addressed `(level, index)`: the node covering leaves
`[index * 2**level, (index + 1) * 2**level)`. Every range the RFC's algorithms need splits into O(log n)
such subtrees, so appends and proofs read and write O(log n) stored hashes and never rehash the tree.

The proof builders here take the stored hashes as a mapping; `*_nodes()` say which ones to fetch.
The verifiers are RFC 9162 sections 2.1.3.2 (inclusion) and 2.1.4.2 (consistency), step by step.
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()
Node = tuple[int, int]  # (level, index)


def leaf_hash(leaf: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


def range_nodes(start: int, end: int) -> list[Node]:
    """The perfect subtrees, left to right, whose right fold is MTH(D[start:end]).

    Valid for the ranges RFC 9162's recursion produces: `start` is a multiple of a power of two at least
    `end - start`, so each greedy chunk is aligned.
    """
    nodes = []
    while start < end:
        level = (end - start).bit_length() - 1
        nodes.append((level, start >> level))
        start += 1 << level
    return nodes


def fold(hashes: list[bytes]) -> bytes:
    """Right fold of perfect-subtree hashes, largest first: H(a, H(b, H(c, d)))."""
    if not hashes:
        return EMPTY_ROOT
    result = hashes[-1]
    for left in reversed(hashes[:-1]):
        result = node_hash(left, result)
    return result


def range_hash(start: int, end: int, stored: Mapping[Node, bytes]) -> bytes:
    return fold([stored[node] for node in range_nodes(start, end)])


def root_nodes(size: int) -> list[Node]:
    return range_nodes(0, size)


def _inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """The ranges whose hashes make PATH(index, D[0:size]), from the leaf upwards (RFC 9162 2.1.3.1)."""
    if not 0 <= index < size:
        raise ValueError("leaf index outside the tree")
    ranges = []
    start, end = 0, size
    while end - start > 1:
        k = _split(end - start)
        if index - start < k:
            ranges.append((start + k, end))
            end = start + k
        else:
            ranges.append((start, start + k))
            start += k
    return ranges[::-1]


def _consistency_ranges(first: int, second: int) -> list[tuple[int, int]]:
    """The ranges whose hashes make PROOF(first, D[0:second]) (RFC 9162 2.1.4.1)."""
    if not 0 < first <= second:
        raise ValueError("a consistency proof needs 0 < first <= second")
    if first == second:
        return []
    outer = []
    start, m, n, complete = 0, first, second, True
    while m != n:
        k = _split(n)
        if m <= k:
            outer.append((start + k, start + n))
            n = k
        else:
            outer.append((start, start + k))
            start, m, n, complete = start + k, m - k, n - k, False
    inner = [] if complete else [(start, start + m)]
    return inner + outer[::-1]


def inclusion_nodes(index: int, size: int) -> set[Node]:
    return {node for start, end in _inclusion_ranges(index, size) for node in range_nodes(start, end)}


def consistency_nodes(first: int, second: int) -> set[Node]:
    return {node for start, end in _consistency_ranges(first, second) for node in range_nodes(start, end)}


def inclusion_proof(index: int, size: int, stored: Mapping[Node, bytes]) -> list[bytes]:
    return [range_hash(start, end, stored) for start, end in _inclusion_ranges(index, size)]


def consistency_proof(first: int, second: int, stored: Mapping[Node, bytes]) -> list[bytes]:
    return [range_hash(start, end, stored) for start, end in _consistency_ranges(first, second)]


def append(size: int, frontier: list[bytes], leaf: bytes) -> tuple[list[tuple[int, int, bytes]], list[bytes]]:
    """Append one leaf hash to a tree of `size` leaves.

    `frontier` holds the hashes of the perfect subtrees that make the tree (`root_nodes(size)`), largest
    first. Returns the nodes completed by this leaf, as `(level, index, hash)` (the leaf itself first),
    and the new frontier. O(log n), and amortized two nodes per leaf.
    """
    return append_many(size, frontier, [leaf])


def append_many(size: int, frontier: list[bytes], leaves: list[bytes], *,
                with_leaves: bool = True) -> tuple[list[tuple[int, int, bytes]], list[bytes]]:
    """`append` for several leaves: every node they complete, in order, and the final frontier.
    `with_leaves=False` leaves out the level-0 nodes (the leaf hashes given), for a store that has them
    elsewhere: then about one node per leaf."""
    created: list[tuple[int, int, bytes]] = []
    frontier = list(frontier)
    add, pop, sha256 = created.append, frontier.pop, hashlib.sha256
    for index, leaf in enumerate(leaves, size):
        if with_leaves:
            add((0, index, leaf))
        level, current = 0, leaf
        while index & 1:
            current = sha256(b"\x01" + pop() + current).digest()
            level, index = level + 1, index >> 1
            add((level, index, current))
        frontier.append(current)
    return created, frontier


def verify_inclusion(index: int, size: int, leaf: bytes, proof: list[bytes], root: bytes) -> bool:
    """RFC 9162 section 2.1.3.2: does `proof` lead from the leaf hash at `index` to `root`?"""
    if not 0 <= index < size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(first: int, second: int, first_root: bytes, second_root: bytes,
                       proof: list[bytes]) -> bool:
    """RFC 9162 section 2.1.4.2: is the tree of `second` leaves an extension of the one of `first`?"""
    if first == second:
        return not proof and first_root == second_root
    if first == 0:  # every tree extends the empty one
        return not proof and first_root == EMPTY_ROOT and second > 0
    if not 0 < first < second or not proof:
        return False
    path = list(proof)
    if first & (first - 1) == 0:  # first is an exact power of two: its root starts the path
        path.insert(0, first_root)
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:  # the walk of verify_inclusion, over both roots at once: the RFC writes both out

        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return fr == first_root and sr == second_root and sn == 0
