"""The Merkle tree of a certificate: every bound file by SHA-256, one root.

The tree is RFC 6962's (Certificate Transparency, section 2.1) over the leaves sorted by
path, so any implementation of that RFC recomputes the root:

    leaf hash  = SHA-256(0x00 || leaf)
    node hash  = SHA-256(0x01 || left || right)
    MTH(n > 1) = node(MTH(first k leaves), MTH(the rest)), k the largest power of two < n

with `leaf` = UTF-8 of "<path>\\n<sha256 of the file, hex>\\n<bytes>". The 0x00/0x01
prefixes keep a leaf from passing for a node (second-preimage). Only hashlib's SHA-256:
no cryptography of our own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from runrecord.ids import file_digest


@dataclass(frozen=True)
class Leaf:
    """One bound file: its path in the certificate (e.g. records/<run id>/episodes.csv),
    its SHA-256 and its size."""

    path: str
    sha256: str
    size: int

    def encoded(self) -> bytes:
        return f"{self.path}\n{self.sha256}\n{self.size}".encode()

    def as_dict(self) -> dict[str, str | int]:
        return {"path": self.path, "sha256": self.sha256, "bytes": self.size}


def leaf_of(cert_path: str, file: Path) -> Leaf:
    digest, size = file_digest(file)
    return Leaf(cert_path, digest, size)


def _leaf_hash(leaf: Leaf) -> bytes:
    return hashlib.sha256(b"\x00" + leaf.encoded()).digest()


def _node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _mth(hashes: Sequence[bytes]) -> bytes:
    if len(hashes) == 1:
        return hashes[0]
    k = 1 << ((len(hashes) - 1).bit_length() - 1)  # largest power of two < n
    return _node_hash(_mth(hashes[:k]), _mth(hashes[k:]))


def merkle_root(leaves: Sequence[Leaf]) -> str:
    """The root (hex) over `leaves` sorted by path; the hash of the empty string for none
    (RFC 6962's MTH of an empty list). Paths must be unique."""
    ordered = sorted(leaves, key=lambda leaf: leaf.path)
    paths = [leaf.path for leaf in ordered]
    if len(set(paths)) != len(paths):
        raise ValueError("a path is bound twice")
    if not ordered:
        return hashlib.sha256(b"").hexdigest()
    return _mth([_leaf_hash(leaf) for leaf in ordered]).hex()


def inclusion_proof(leaves: Sequence[Leaf], path: str) -> list[str]:
    """The audit path of one leaf (RFC 6962 section 2.1.1): the sibling hashes, lowest
    first, that with the leaf's hash give the root; for publishing one file's membership."""
    ordered = sorted(leaves, key=lambda leaf: leaf.path)
    index = [leaf.path for leaf in ordered].index(path)
    hashes = [_leaf_hash(leaf) for leaf in ordered]

    def walk(m: int, items: Sequence[bytes]) -> list[bytes]:
        if len(items) == 1:
            return []
        k = 1 << ((len(items) - 1).bit_length() - 1)
        if m < k:
            return [*walk(m, items[:k]), _mth(items[k:])]
        return [*walk(m - k, items[k:]), _mth(items[:k])]

    return [h.hex() for h in walk(index, hashes)]


def root_from_proof(leaf: Leaf, index: int, size: int, proof: Sequence[str]) -> str:
    """The root an inclusion proof gives for `leaf` at `index` of `size` leaves (RFC 9162
    section 2.1.3.2), to check a proof without the other files."""
    fn, sn = index, size - 1
    r = _leaf_hash(leaf)
    for p in (bytes.fromhex(x) for x in proof):
        if sn == 0:
            raise ValueError("proof too long")
        if fn & 1 or fn == sn:
            r = _node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = _node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ValueError("proof too short")
    return r.hex()
