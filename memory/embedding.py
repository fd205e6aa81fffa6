"""Embedders turn content into vectors for similarity search; pluggable through settings.LEDGER_EMBEDDER.

The default, `HashingEmbedder`, needs no download: feature hashing of word unigrams and character
trigrams into a fixed number of dimensions, signed, L2-normalized. It is a real vector space (texts
sharing words and spellings are close), not a semantic model; a deployment that wants one sets
LEDGER_EMBEDDER to a class with the same `dim` and `embed()`.
"""
from __future__ import annotations

import hashlib
import re
from functools import lru_cache

import numpy as np
from django.conf import settings
from django.utils.module_loading import import_string

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    dim = 256

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self.dim
                out[row, bucket] += 1.0 if digest[4] & 1 else -1.0
            norm = np.linalg.norm(out[row])
            if norm:
                out[row] /= norm
        return out

    @staticmethod
    def _features(text: str):
        words = _WORD.findall(text.lower())
        yield from (f"w:{w}" for w in words)
        for w in words:
            padded = f"^{w}$"
            yield from (f"c:{padded[i:i + 3]}" for i in range(len(padded) - 2))


@lru_cache(maxsize=1)
def embedder():
    return import_string(settings.LEDGER_EMBEDDER)()


def vector_to_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def vectors_from_bytes(blobs: list[bytes], dim: int) -> np.ndarray:
    if not blobs:
        return np.zeros((0, dim), dtype=np.float32)
    return np.frombuffer(b"".join(bytes(b) for b in blobs), dtype="<f4").reshape(len(blobs), dim)
