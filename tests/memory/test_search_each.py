"""The `_each` forms of the search paths (what confirm-erasure probes a group of forgets with) find exactly
what the single searches find, record by record: the same match, the same index and scores, the same final
step (forgotten, redacted and other tenants' records never come back)."""

import pytest

from memory.embedding import embedder, embedder_identity, vector_to_bytes
from memory.models import DerivedArtifact, Lineage, Record
from memory.selectors import records_search, records_search_each, records_similar, records_similar_each
from memory.services import ForgetTarget, artifact_write, records_forget
from tests.factories import ContentClassFactory, record

pytestmark = pytest.mark.django_db

CONTENTS = [
    "my address is 12 Tangerine Lane",
    "MY ADDRESS is 12 tangerine lane, flat 3",
    "100% pure_gold and a back\\slash",
    "100 pure gold and a backslash",
    "café naïve Straße",
    "the cat is called Falcon",
    "falcon",
]

def searched_alone(tenant, queries: dict[int, str]) -> set[int]:
    return {pk for pk, q in queries.items() if records_search(tenant=tenant, q=q, limit=1, within_ids=[pk])}

def similar_alone(tenant, queries: dict[int, str]) -> set[int]:
    return {pk for pk, q in queries.items() if records_similar(tenant=tenant, q=q, limit=1, within_ids=[pk])}

@pytest.fixture
def store(tenant, chat, other_tenant):
    """Records in every state a probe meets: visible, hidden, redacted, another tenant's; an embedding shared
    by a hidden and a visible record (a similarity hit through the visible one)."""
    visible = [record(tenant, chat, content=c, subject=f"s{i}") for i, c in enumerate(CONTENTS)]
    hidden = [record(tenant, chat, content=c, subject=f"h{i}") for i, c in enumerate(CONTENTS)]
    redacted = [record(tenant, chat, content=c, subject=f"r{i}") for i, c in enumerate(CONTENTS[:3])]
    theirs = record(other_tenant, ContentClassFactory(tenant=other_tenant, name="chat"), content=CONTENTS[0])
    records_forget(tenant=tenant, target=ForgetTarget(record_ids=tuple(r.pk for r in hidden)), mode="soft",
                   actor="test")
    records_forget(tenant=tenant, target=ForgetTarget(record_ids=tuple(r.pk for r in redacted)), mode="redact",
                   actor="test")
    # A copy the forget missed (what confirmation exists to catch): an embedding of a hidden record and a visible one.
    shared = DerivedArtifact.objects.create(tenant=tenant, scope=visible[0].scope, kind="embedding",
                                            vector=vector_to_bytes(embedder().embed([CONTENTS[5]])[0]),
                                            embedder=embedder_identity(), created_at=visible[0].created_at)
    Lineage.objects.bulk_create([Lineage(artifact=shared, source=hidden[5]), Lineage(artifact=shared, source=visible[0])])
    return visible + hidden + redacted + [theirs]

def all_queries(records) -> list[dict[int, str]]:
    """Each record with its own words, and with every other record's words (matching and not)."""
    words = [" ".join(c.split()[:5]) for c in CONTENTS] + ["ADDRESS tangerine", "100%", "pure_gold", "\\slash", "zzz"]
    return [{r.pk: w for r in records} for w in words] + [{r.pk: " ".join(r.content.split()[:5]) or "x"
                                                            for r in records}]

def test_keyword_search_each_finds_what_each_search_alone_finds(tenant, store):
    contents = dict(Record.objects.filter(pk__in=[r.pk for r in store]).values_list("pk", "content"))
    own = {pk: " ".join(content.split()[:5]) for pk, content in contents.items() if content}
    found = records_search_each(tenant=tenant, queries=own)

    assert found == searched_alone(tenant, own)
    assert found  # the visible records, by their own words
    assert not found & {r.pk for r in store if r.subject.ref[0] in "hr"} and store[-1].pk not in found
    for queries in all_queries(store):
        assert records_search_each(tenant=tenant, queries=queries) == searched_alone(tenant, queries), queries

def test_similarity_search_each_finds_what_each_search_alone_finds(tenant, store):
    own = {r.pk: r.content for r in store}
    found = records_similar_each(tenant=tenant, queries=own)

    assert found == similar_alone(tenant, own)
    hidden_falcon = next(r for r in store if r.subject.ref == "h5")
    assert hidden_falcon.pk in found  # through the visible record that shares its embedding
    for queries in all_queries(store):
        assert records_similar_each(tenant=tenant, queries=queries) == similar_alone(tenant, queries), queries

def test_similarity_search_each_scores_each_record_among_its_own_embeddings_only(tenant, chat):
    """A hidden record's two nearest embeddings are its own; the third, shared with a visible record, is not
    a hit (nor is another record's embedding in the same batch, however near)."""
    hidden = record(tenant, chat, content="falcon", subject="a")
    near = record(tenant, chat, content="falcon", subject="b")
    shared_with = record(tenant, chat, content="unrelated words", subject="c")
    artifact_write(tenant=tenant, kind="embedding", source_ids=[hidden.pk], content="falcon falcons")
    artifact_write(tenant=tenant, kind="embedding", source_ids=[hidden.pk, shared_with.pk],
                   content="falcon tangerine lane street")
    Record.objects.filter(pk=hidden.pk).update(forgotten_at=hidden.created_at)
    queries = {hidden.pk: "falcon", near.pk: "falcon"}

    assert records_similar_each(tenant=tenant, queries=queries) == similar_alone(tenant, queries) == {near.pk}
    assert similar_alone(tenant, {shared_with.pk: "falcon"}) == {shared_with.pk}  # the shared one does score
