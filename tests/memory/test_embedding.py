"""The embedders (memory.embedding): the semantic one loads offline and puts texts of the same meaning in other
words nearest, through the similarity search and its index; both give an empty text the zero vector."""
import socket
import sys

import numpy as np
import pytest
from django.db import connection

from memory import checks, selectors
from memory.embedding import HashingEmbedder, WordLlamaEmbedder, embedder
from memory.selectors import records_similar
from memory.services import ForgetTarget, records_forget
from tests.factories import record
from tests.memory.test_similarity_index import embedding_of, graph_nearest

SEMANTIC = "memory.embedding.WordLlamaEmbedder"


@pytest.fixture
def semantic(embedder_as):
    """The service's embedder is the semantic one for this test."""
    embedder_as(SEMANTIC)
    return embedder()


@pytest.fixture
def no_network(monkeypatch):
    """Any connection out of this process fails (the model hub is outside: it must not be needed)."""
    def refused(*args, **kwargs):
        raise OSError("no network in this test")

    monkeypatch.setattr(socket, "create_connection", refused)
    monkeypatch.setattr(socket.socket, "connect", refused)


def cosines(model, texts: list[str]) -> np.ndarray:
    vectors = model.embed(texts)
    return vectors @ vectors.T


def test_the_semantic_embedder_loads_with_no_network_and_no_model_hub(no_network):
    model = WordLlamaEmbedder()
    vectors = model.embed(["the invoice is due on Friday"])
    assert vectors.shape == (1, model.dim) == (1, 256) and vectors.dtype == np.float32
    assert np.isclose(np.linalg.norm(vectors[0]), 1.0)


def test_texts_of_the_same_meaning_in_other_words_are_nearest_with_the_semantic_embedder_only():
    texts = ["the cat slept on the mat", "a kitten dozed on a rug", "the quarterly invoice for the harbour cranes",
             "my sister lives in Lisbon"]
    semantic = cosines(WordLlamaEmbedder(), texts)
    assert np.argsort(-semantic[0])[1] == 1 and semantic[0, 1] > 2 * max(semantic[0, 2], semantic[0, 3])
    # No word in common: to the hashing embedder, the cat and the kitten are no nearer than the invoice.
    hashing = cosines(HashingEmbedder(), texts)
    assert hashing[0, 1] < 0.2


@pytest.mark.parametrize("model", [HashingEmbedder, WordLlamaEmbedder])
def test_an_empty_text_is_the_zero_vector_and_no_text_no_vector(model):
    vectors = model().embed(["", "a note"])
    assert not vectors[0].any() and not np.isnan(vectors).any()
    assert model().embed([]).shape == (0, 256)


@pytest.mark.django_db
def test_the_similarity_search_finds_a_memory_by_its_meaning_and_not_once_forgotten(semantic, tenant, chat):
    cat = record(tenant, chat, content="the cat slept on the mat all afternoon", subject="a")
    record(tenant, chat, content="the quarterly invoice for the harbour cranes is overdue", subject="b")
    record(tenant, chat, content="my sister moved to Lisbon last spring", subject="c")

    assert [h.record.pk for h in records_similar(tenant=tenant, q="a kitten dozing on a rug", limit=1)] == [cat.pk]
    if connection.vendor == "postgresql" and selectors._hnsw_index():
        assert graph_nearest(bytes(embedding_of(cat.pk).vector))[0] == embedding_of(cat.pk).pk

    records_forget(tenant=tenant, target=ForgetTarget(record_ids=(cat.pk,)), mode="soft", actor="test")

    assert cat.pk not in [h.record.pk for h in records_similar(tenant=tenant, q="a kitten dozing on a rug", limit=3)]


class _NoDim:
    def embed(self, texts):
        return np.zeros((len(texts), 3), dtype=np.float32)


class _Small(_NoDim):
    dim = 3


class _Greedy(_NoDim):
    dim = 256
    hnsw_ef_search = 5000


class _LongNamed(_NoDim):
    dim = 256
    identity = "x" * 101  # longer than DerivedArtifact.embedder holds


@pytest.mark.parametrize(("dotted", "code"), [
    ("memory.embedding.NoSuchEmbedder", "memory.E001"),
    ("tests.memory.test_embedding._NoDim", "memory.E002"),
    ("tests.memory.test_embedding._Small", "memory.W001"),
    ("tests.memory.test_embedding._Greedy", "memory.E003"),
    ("tests.memory.test_embedding._LongNamed", "memory.E004"),
])
def test_a_misconfigured_embedder_is_reported_at_start_not_at_the_first_write(embedder_as, dotted, code):
    embedder_as(dotted)
    assert [message.id for message in checks.embedder_check()] == [code]


def test_an_embedder_whose_library_is_missing_names_the_package(embedder_as, monkeypatch):
    monkeypatch.setitem(sys.modules, "wordllama", None)  # as if wordllama were not installed
    embedder_as(SEMANTIC)
    [message] = checks.embedder_check()
    assert message.id == "memory.E001" and "wordllama" in message.msg
    assert "`wordllama` package" in message.hint and "pip install -e ." in message.hint


def test_both_embedders_pass_the_check(embedder_as):
    for dotted in ("memory.embedding.HashingEmbedder", SEMANTIC):
        embedder_as(dotted)
        assert checks.embedder_check() == []
