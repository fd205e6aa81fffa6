"""The keyword search's index (memory 0014) on PostgreSQL: its semantics (words and prefixes, no stemming,
ranked), its use by the planner, and forgetting that reaches the index itself, below the selector's final step.
SQLite's FTS5 twin: tests/memory/test_keyword_index_sqlite.py."""
import pytest
from django.db import IntegrityError, connection, transaction

from memory.models import Record
from memory.selectors import records_search, records_search_each
from memory.services import ForgetTarget, records_forget
from tests.factories import record, rule

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("the tsvector index is PostgreSQL's")


def found(tenant, q: str, **kwargs) -> list[str]:
    return [r.content for r in records_search(tenant=tenant, q=q, **kwargs)]


def sql(statement: str, params=None) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def in_index(word: str) -> set[int]:
    """The records whose index entry holds a word starting with `word`: the column itself and, separately, the
    GIN index (sequential scans off), with no filter of the selector's."""
    column = {pk for (pk,) in sql("SELECT id FROM memory_record WHERE content_search @@ to_tsquery('simple', %s)",
                                  [f"{word}:*"])}
    with transaction.atomic():
        sql("SET LOCAL enable_seqscan = off")
        indexed = {pk for (pk,) in sql(
            "SELECT id FROM memory_record WHERE content_search @@ to_tsquery('simple', %s) "
            "AND forgotten_at IS NULL AND redacted_at IS NULL", [f"{word}:*"])}
    return column | indexed


def test_words_match_whole_or_as_prefixes_not_inside_a_word(tenant, chat):
    record(tenant, chat, content="The cat is called Falcon", subject="a")
    record(tenant, chat, content="a peregrine; falconry club", subject="b")

    assert sorted(found(tenant, "falc")) == ["The cat is called Falcon", "a peregrine; falconry club"]
    assert found(tenant, "FALCON called") == ["The cat is called Falcon"]  # every word, any order, any case
    assert found(tenant, "alcon") == []  # the inside of a word is not a match (the LIKE search found it)
    assert found(tenant, "falcons") == []  # no stemming: a longer word is not a prefix of a shorter one
    assert found(tenant, "peregrine falconry zebra") == []


def test_no_language_is_assumed_words_of_any_script_match(tenant, chat):
    record(tenant, chat, content="Wir wohnen in der Hauptstraße 5, Köln", subject="a")
    record(tenant, chat, content="東京 と 大阪", subject="b")
    record(tenant, chat, content="the running of the bulls", subject="c")

    assert found(tenant, "hauptstr köln") == ["Wir wohnen in der Hauptstraße 5, Köln"]
    assert found(tenant, "der") == ["Wir wohnen in der Hauptstraße 5, Köln"]  # a stop word elsewhere is a word
    assert found(tenant, "東京") == ["東京 と 大阪"]
    assert found(tenant, "the") == ["the running of the bulls"]  # no English stop words either
    assert found(tenant, "run") == ["the running of the bulls"]  # a prefix, not a stem


def test_punctuation_only_finds_nothing_and_quotes_backslashes_are_words_apart(tenant, chat):
    record(tenant, chat, content="it's a back\\slash and a 'quote'", subject="a")

    assert found(tenant, "!!! ???") == []
    assert found(tenant, "\\slash") == ["it's a back\\slash and a 'quote'"]
    assert found(tenant, "'quote' it's") == ["it's a back\\slash and a 'quote'"]
    assert found(tenant, "it'':* | !s") == ["it's a back\\slash and a 'quote'"]  # tsquery syntax is not parsed
    assert found(tenant, "a\x00back") == ["it's a back\\slash and a 'quote'"]


def test_denser_matches_rank_first_whatever_their_age(tenant, chat):
    dense = record(tenant, chat, content="falcon falcon falcon, the falcon", subject="a", age_days=30)
    record(tenant, chat, content="one falcon among many other words here", subject="b")
    record(tenant, chat, content="nothing to see", subject="c")

    results = records_search(tenant=tenant, q="falcon", limit=10)
    assert [r.pk for r in results][0] == dense.pk and len(results) == 2
    assert len(records_search(tenant=tenant, q="falcon", limit=1)) == 1


def test_a_query_matching_more_than_keyword_ranked_ranks_the_newest_matches(tenant, chat, monkeypatch):
    """The documented cap (README, "Keyword search"): only the KEYWORD_RANKED most recently written matches are
    ranked, so an older, denser match falls out once newer ones fill the cap."""
    from memory import selectors

    dense = record(tenant, chat, content="falcon falcon falcon, the falcon", subject="a")
    newer = [record(tenant, chat, content=f"one falcon among many other words, number {n}", subject="b").pk
             for n in range(3)]
    assert records_search(tenant=tenant, q="falcon", limit=1)[0].pk == dense.pk

    monkeypatch.setattr(selectors, "KEYWORD_RANKED", 3)
    assert sorted(r.pk for r in records_search(tenant=tenant, q="falcon", limit=10)) == newer
    monkeypatch.setattr(selectors, "KEYWORD_RANKED", 4)
    assert records_search(tenant=tenant, q="falcon", limit=1)[0].pk == dense.pk


def test_keyword_query_uses_the_gin_index(tenant, chat):
    """On a small table (the bench measures it at 1,000,000 records: bench/bench_search.py)."""
    target = record(tenant, chat, content="the launch code is zebrafish", subject="z")
    sql("INSERT INTO memory_record (tenant_id, scope_id, subject_id, content_class_id, content, commitment, salt, "
        "tier, created_at, erasure_pending) SELECT tenant_id, scope_id, subject_id, content_class_id, "
        "'note ' || g || ' about tangerines and lanes', commitment, salt, tier, created_at, false "
        "FROM memory_record, generate_series(1, 2000) g WHERE id = %s", [target.pk])
    # The rows just inserted wait in the GIN's pending list (fastupdate) until a VACUUM: the planner prices a
    # scan of that list, so merge it, as autovacuum would, before asking for the plan.
    sql("SELECT gin_clean_pending_list('memory_record_content_search_idx')")
    sql("ANALYZE memory_record")
    from memory import selectors

    query = selectors._tsquery("zebrafish")
    with transaction.atomic():
        sql("SET LOCAL enable_seqscan = off")
        statement = selectors._KEYWORD_SQL.format(within="", ranked=selectors.KEYWORD_RANKED)
        plan = "\n".join(row[0] for row in sql("EXPLAIN " + statement,
                                               {"tenant": tenant.pk, "query": query, "limit": 10}))
        assert [r.pk for r in records_search(tenant=tenant, q="zebrafish")] == [target.pk]
    assert "memory_record_content_search_idx" in plan, plan


@pytest.mark.parametrize("mode", ["soft", "redact"])
def test_a_forgotten_record_leaves_the_index_itself(tenant, chat, mode):
    gone = record(tenant, chat, content="the launch code is tangerine falcon", subject="a")
    kept = record(tenant, chat, content="tangerine falcon notes", subject="b")
    assert in_index("tangerin") == {gone.pk, kept.pk}

    records_forget(tenant=tenant, target=ForgetTarget(record_ids=(gone.pk,)), mode=mode, actor="test")

    assert in_index("tangerin") == {kept.pk}
    assert sql("SELECT content_search FROM memory_record WHERE id = %s", [gone.pk]) == [(None,)]
    assert found(tenant, "launch code") == []
    assert records_search_each(tenant=tenant, queries={gone.pk: "tangerine falcon", kept.pk: "tangerine"}) == {kept.pk}


def test_a_record_hidden_by_any_update_leaves_the_index(tenant, chat):
    """Not only the forget service: any UPDATE that hides a record takes its words out with it."""
    hidden = record(tenant, chat, content="zebrafish in the pond", subject="a")
    Record.objects.filter(pk=hidden.pk).update(forgotten_at=hidden.created_at)

    assert in_index("zebrafish") == set()


def test_the_index_column_takes_no_value_and_the_guard_still_accepts_a_redaction(tenant, chat):
    rule(tenant, chat, days=365, protects="existence")
    locked = record(tenant, chat, content="the launch code is zebrafish", subject="a")
    assert Record.objects.get(pk=locked.pk).retained_until is not None

    with pytest.raises(Exception, match="generated|DEFAULT"), transaction.atomic():
        sql("UPDATE memory_record SET content_search = to_tsvector('simple', 'other words') WHERE id = %s",
            [locked.pk])
    with pytest.raises(IntegrityError, match="retention_lock"), transaction.atomic():
        sql("UPDATE memory_record SET content = 'other words' WHERE id = %s", [locked.pk])
    records_forget(tenant=tenant, target=ForgetTarget(record_ids=(locked.pk,)), mode="redact", actor="test")

    stored = Record.objects.get(pk=locked.pk)
    assert stored.content == "" and stored.redacted_at is not None
    assert in_index("zebrafish") == set()


def test_the_application_role_has_no_update_on_the_index_column(app_role):
    with app_role() as conn:
        privileges = dict(conn.execute(
            "SELECT attname, has_column_privilege(current_user, 'memory_record', attname, 'UPDATE') "
            "FROM pg_attribute WHERE attrelid = 'memory_record'::regclass AND attname IN ('content_search', "
            "'content')").fetchall())
    assert privileges == {"content_search": False, "content": True}
