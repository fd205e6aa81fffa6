"""The keyword search's index on SQLite, the embedded default (memory 0014: an FTS5 table kept in step with the
readable records by triggers): the same semantics as on PostgreSQL, and a forget that reaches the FTS5 table
itself.

The database is built as the embedded service builds it (`manage.py migrate` in a subprocess), and the
searches and forgets run through the selectors and services in a subprocess on that file (the test suite's
own database is PostgreSQL); the FTS5 table is then read directly through Python's `sqlite3`.
"""
from __future__ import annotations

import sqlite3

import pytest

from tests.sqlite_service import manage_script, sqlite_copy, sqlite_env

SCRIPT = r"""
import json
from memory.models import Record
from memory.selectors import records_search, records_search_each
from memory.services import ForgetTarget, record_write, records_forget
from memory.services.tokens import tenant_get_or_create
from retention.services import content_class_create

tenant, other = tenant_get_or_create(name="acme"), tenant_get_or_create(name="globex")
content_class_create(tenant=tenant, name="chat", actor="test")
content_class_create(tenant=other, name="chat", actor="test")

def write(content, subject, tenant=tenant):
    return record_write(tenant=tenant, scope_path="user:1", content_class_name="chat", content=content,
                        subject_ref=subject).pk

ids = {
    "falcon": write("The cat is called Falcon", "a"),
    "falconry": write("a peregrine; falconry club", "b"),
    "dense": write("falcon falcon falcon, the falcon", "c"),
    "strasse": write("Wir wohnen in der Hauptstraße 5, Köln", "d"),
    "hidden": write("the launch code is tangerine zebrafish", "e"),
    "redacted": write("tangerine zebrafish lane", "f"),
    "kept": write("tangerine notes", "g"),
    "theirs": write("tangerine zebrafish of another tenant", "h", tenant=other),
}

def found(q, **kwargs):
    return [r.pk for r in records_search(tenant=tenant, q=q, **kwargs)]

before = {"tangerine": found("tangerine", limit=10), "zebrafish": found("zebrafish")}
import memory.selectors
ranked, memory.selectors.KEYWORD_RANKED = memory.selectors.KEYWORD_RANKED, 2  # only the 2 newest matches ranked
capped = found("falc")
memory.selectors.KEYWORD_RANKED = ranked
records_forget(tenant=tenant, target=ForgetTarget(record_ids=(ids["hidden"],)), mode="soft", actor="test")
records_forget(tenant=tenant, target=ForgetTarget(record_ids=(ids["redacted"],)), mode="redact", actor="test")
print(json.dumps({
    "ids": ids,
    "before": before,
    "falc": found("falc"), "falcon_called": found("FALCON called"), "alcon": found("alcon"),
    "falcons": found("falcons"), "hauptstr": found("hauptstr köln"), "punctuation": found("!!! ???"),
    "ranked": found("falcon"), "capped": capped,
    "tangerine": found("tangerine", limit=10), "zebrafish": found("zebrafish"),
    "within": found("tangerine", within_ids=[ids["kept"], ids["hidden"]]),
    "each": sorted(records_search_each(tenant=tenant, queries={
        ids["hidden"]: "tangerine zebrafish", ids["redacted"]: "tangerine", ids["kept"]: "tangerine",
        ids["falcon"]: "falc cat", ids["strasse"]: "nothing"})),
}))
"""


@pytest.fixture(scope="module")
def searched(sqlite_template, tmp_path_factory):
    path = sqlite_copy(sqlite_template, tmp_path_factory.mktemp("keyword-sqlite"))
    return path, manage_script(SCRIPT, env=sqlite_env(path))


def test_words_match_whole_or_as_prefixes_as_on_postgresql(searched):
    _, out = searched
    ids = out["ids"]
    assert sorted(out["falc"]) == sorted([ids["falcon"], ids["falconry"], ids["dense"]])
    assert out["falcon_called"] == [ids["falcon"]]
    assert out["alcon"] == [] and out["falcons"] == [] and out["punctuation"] == []
    assert out["hauptstr"] == [ids["strasse"]]
    assert out["ranked"][0] == ids["dense"]  # bm25: the densest match first
    assert sorted(out["capped"]) == sorted([ids["falconry"], ids["dense"]])  # KEYWORD_RANKED: the newest matches


def test_forgotten_and_redacted_records_leave_the_fts5_table(searched):
    path, out = searched
    ids = out["ids"]
    assert sorted(out["before"]["tangerine"]) == sorted([ids["hidden"], ids["redacted"], ids["kept"]])
    assert out["tangerine"] == [ids["kept"]] and out["zebrafish"] == []
    assert out["within"] == [ids["kept"]]
    assert out["each"] == sorted([ids["kept"], ids["falcon"]])

    conn = sqlite3.connect(path)
    try:
        indexed = {pk for (pk,) in conn.execute(
            "SELECT rowid FROM memory_record_search WHERE memory_record_search MATCH 'tangerine'")}
        # The only other copy is another tenant's (the selector filters tenants, the index holds them all).
        assert indexed == {ids["kept"], ids["theirs"]}
        assert conn.execute("SELECT count(*) FROM memory_record_search WHERE memory_record_search MATCH "
                            "'zebrafish'").fetchone()[0] == 1
        # The triggers that keep it in step are there after every migration.
        triggers = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        assert {"memory_record_search_insert", "memory_record_search_update",
                "memory_record_search_delete"} <= triggers
        # A raw DELETE of a readable row takes its entry too (a contentless table forgets by the old words).
        conn.execute("DELETE FROM memory_record WHERE id = ?", (ids["kept"],))
        assert conn.execute("SELECT count(*) FROM memory_record_search WHERE memory_record_search MATCH "
                            "'tangerine'").fetchone()[0] == 1
        conn.execute("INSERT INTO memory_record_search (memory_record_search) VALUES ('integrity-check')")
    finally:
        conn.close()
