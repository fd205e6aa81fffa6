"""Embedders turn content into vectors for similarity search; pluggable through settings.LEDGER_EMBEDDER.

The default, `WordLlamaEmbedder`, is a semantic model whose weights ship in its wheel (nothing is downloaded):
texts with the same meaning in other words are close. `HashingEmbedder` needs no model: feature hashing of word
unigrams and character trigrams into a fixed number of dimensions, signed, L2-normalized; a real vector space
(texts sharing words and spellings are close), not a semantic one, and the default until the stores' vectors
recorded their maker (memory 0018) and could be made again (`manage.py reembed`). A deployment sets
LEDGER_EMBEDDER to either, or to a class of its own with a `dim` and an `embed()` (and an `identity`, else its
dotted path stands for it).

Vectors of two embedders are not comparable: each embedding artifact records the `identity` of the embedder
that made its vector (`DerivedArtifact.embedder`), and the similarity search compares the query's vector with
those of the configured embedder only. After LEDGER_EMBEDDER changes, `manage.py reembed` makes the store's
vectors again with the new one (memory.services.reembed); until it has, the others are not found by similarity.
"""
from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
from django.conf import settings
from django.utils.module_loading import import_string

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    dim = 256
    # What `DerivedArtifact.embedder` records of its vectors: a new version of the features gets a new identity.
    identity = "hashing-256-v1"
    # The similarity index's hnsw.ef_search for these vectors (unless LEDGER_HNSW_EF_SEARCH says): recall@10 0.91
    # at 1,000,000 of the bench's generated words, 0.97 when they have topics; 0.96 at 200,000 (bench/README.md).
    hnsw_ef_search = 800

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


class WordLlamaEmbedder:
    """WordLlama's `l2_supercat` model: token embeddings distilled from Llama 2's, averaged over a text's tokens
    and L2-normalized; 256 dimensions, as the similarity index's column (memory 0016). Its weights (16 MB) and
    tokenizer ship inside the `wordllama` wheel, so it loads offline: no model hub is reached, at install or at
    first use. The library's loader looks for the tokenizer in its cache directory, not its package (0.4), so
    it is pointed at the package's own directory, downloads off."""

    dim = 256
    identity = "wordllama-l2_supercat-256"
    # recall@10 0.974 at 1,000,000 records of real prose, 8.7 ms at p50 for pgvector (bench/README.md); 60 gave
    # 0.957, 200 gave 0.982 at 14 ms.
    hnsw_ef_search = 100

    def __init__(self):
        import wordllama

        self._model = wordllama.WordLlama.load(config="l2_supercat", dim=self.dim,
                                               cache_dir=Path(wordllama.__file__).parent, disable_download=True)

    def embed(self, texts: list[str]) -> np.ndarray:
        vectors = np.asarray(self._model.embed(list(texts), norm=False), dtype=np.float32).reshape(-1, self.dim)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        # A text with no token (empty) has the zero vector, as HashingEmbedder gives it: close to nothing.
        return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


@lru_cache(maxsize=1)
def embedder():
    return import_string(settings.LEDGER_EMBEDDER)()


IDENTITY_MAX = 100  # DerivedArtifact.embedder's length


def identity_of(model) -> str:
    """The identity an embedder's vectors are recorded with: its own `identity`, else its class's dotted path."""
    return getattr(model, "identity", None) or f"{type(model).__module__}.{type(model).__qualname__}"


def embedder_identity() -> str:
    """The identity of the configured embedder (LEDGER_EMBEDDER)."""
    return identity_of(embedder())


def embedded_text(content: str, source_contents: list[str]) -> str:
    """The text an embedding artifact's vector is made from: its own content, else its sources' contents (in
    record id order), a line each."""
    return content or "\n".join(source_contents)


def vector_to_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def vectors_from_bytes(blobs: list[bytes], dim: int) -> np.ndarray:
    if not blobs:
        return np.zeros((0, dim), dtype=np.float32)
    return np.frombuffer(b"".join(bytes(b) for b in blobs), dtype="<f4").reshape(len(blobs), dim)
