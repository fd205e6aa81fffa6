"""Subject references compare in one normal form (memory.subjects): NFC, whitespace trimmed and collapsed,
case kept. Records written under one spelling of a person's reference are found, forgotten and restored
under any other spelling of it; a reference with no valid normal form is refused and changes nothing."""
from __future__ import annotations

import json
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory import errors
from memory.models import Record, Subject
from memory.services import ForgetTarget, archive_restore, subject_get_or_create
from memory.subjects import subject_find, subject_ids_find, subject_ref_normalize
from tests.factories import record

NFC = "José Müller"
NFD = unicodedata.normalize("NFD", NFC)


def post(client, url, body):
    return client.post(url, json.dumps(body), content_type="application/json")


# --- the normal form -------------------------------------------------------------------------------------

def test_the_two_unicode_forms_of_a_name_are_different_strings():
    assert NFD != NFC and len(NFD) == len(NFC) + 2  # the premise of every test here


@pytest.mark.parametrize("ref", [NFD, NFC, f" {NFC} ", f"{NFD}\t", "José  Müller", "José\u00a0Müller",
                                 "\u3000José\nMüller\r\n", "José\x85Müller", unicodedata.normalize("NFD", " José  Müller ")])
def test_spellings_of_one_reference_have_one_normal_form(ref):
    assert subject_ref_normalize(ref) == NFC


@pytest.mark.parametrize("a, b", [
    ("aGVsbG8=", "AGVSBG8="),      # base64: case is significant
    ("cust-A1", "cust-a1"),
    ("\ufb01le-7", "file-7"),      # a ligature is not its letters (no NFKC)
    ("\uff21-7", "A-7"),            # nor a fullwidth letter its ASCII one
    ("x\u00b2", "x2"),
])
def test_case_and_compatibility_forms_stay_distinct_references(a, b):
    assert subject_ref_normalize(a) == a and subject_ref_normalize(b) == b


def test_the_length_limit_counts_the_normal_form():
    decomposed = unicodedata.normalize("NFD", "é" * 200)  # 400 code points, 200 once composed
    assert subject_ref_normalize(decomposed) == "é" * 200
    assert subject_ref_normalize(" " * 50 + "a" * 200 + " " * 50) == "a" * 200


@pytest.mark.parametrize("ref", ["", "   ", "\t\r\n", "a\x00b", "\x00", "a\x1bb", "a\x7f", "a\x1cb", "a\x9fb",
                                 "a\ud800b", "a" * 201, 7, None, b"bytes", ["a"]])
def test_a_reference_without_a_valid_normal_form_is_invalid_subject(ref):
    with pytest.raises(errors.MemoryError) as caught:
        subject_ref_normalize(ref)
    assert caught.value.code == "invalid_subject" and caught.value.status_code == 400


# --- writes, lookups and forget targets --------------------------------------------------------------------

@pytest.mark.django_db
def test_writes_under_every_spelling_reach_one_subject_stored_in_normal_form(tenant, chat):
    written = [record(tenant, chat, subject=ref) for ref in (NFD, NFC, f"  {NFD} ", "José \t Müller")]

    assert list(Subject.objects.values_list("ref", flat=True)) == [NFC]
    assert {r.subject_id for r in Record.objects.filter(pk__in=[r.pk for r in written])} == {
        Subject.objects.get().pk}


@pytest.mark.django_db
def test_record_written_under_nfd_is_forgotten_by_an_nfc_subject_target(tenant, agent):
    from tests.factories import ContentClassFactory

    ContentClassFactory(tenant=tenant, name="chat")
    written = post(agent, "/api/v1/memory/records", {"scope": "user:1", "subject": NFD, "content_class": "chat",
                                                     "content": "my address is 12 Tangerine Lane"})
    assert written.status_code == 201, written.json()

    response = post(agent, "/api/v1/memory/forget", {"target": {"subject": NFC}, "mode": "hard", "reason": "Art. 17"})

    assert response.status_code == 200, response.json()
    assert [r["outcome"] for r in response.json()["results"]] == ["deleted"]
    assert not Record.objects.filter(pk=written.json()["id"]).exists()


@pytest.mark.django_db
def test_forget_target_with_spaces_finds_the_record_written_without(tenant, chat, agent):
    written = record(tenant, chat, subject=NFC, content="the secret")

    response = post(agent, "/api/v1/memory/forget", {"target": {"subject": [f" {NFC} ", "José  Müller"]},
                                                     "mode": "redact"})

    assert response.status_code == 200, response.json()
    assert [r["record_id"] for r in response.json()["results"]] == [written.pk]
    written.refresh_from_db()
    assert written.content == "" and written.redacted_at is not None


@pytest.mark.django_db
@pytest.mark.parametrize("ref, code", [
    # A NUL never reaches the target: the JSON parser refuses it in any body string (config/parsers.py).
    ("José\x00Müller", "invalid"), ("a\x1bb", "invalid_target"), ("", "invalid_target"), ("   ", "invalid_target"),
    ("a" * 201, "invalid_target"),
])
def test_forget_target_subject_without_a_normal_form_is_invalid_target_and_changes_nothing(tenant, chat, agent, ref,
                                                                                           code):
    written = record(tenant, chat, subject=NFC)

    response = post(agent, "/api/v1/memory/forget", {"target": {"subject": ref}, "mode": "hard"})

    assert response.status_code == 400 and response.json()["code"] == code
    assert Record.objects.filter(pk=written.pk, forgotten_at__isnull=True).exists()


@pytest.mark.django_db
def test_write_with_a_control_character_in_the_subject_is_invalid_subject(tenant, chat):
    with pytest.raises(errors.MemoryError) as caught:
        record(tenant, chat, subject="José\x1bMüller")
    assert caught.value.code == "invalid_subject"
    assert not Record.objects.exists() and not Subject.objects.exists()


@pytest.mark.django_db
def test_forget_target_built_in_code_is_normalized_too(tenant, chat):
    # bench/bench_forget.py builds ForgetTarget(subjects=...) without parse(): the lookup normalizes.
    written = record(tenant, chat, subject=NFC)
    assert list(ForgetTarget(subjects=(NFD, f" {NFC}")).records(tenant).values_list("pk", flat=True)) == [written.pk]


@pytest.mark.django_db
def test_restore_of_an_archive_entry_spelled_in_nfd_joins_the_nfc_subject(tenant, chat):
    kept = record(tenant, chat, subject=NFC)
    entry = {"id": 999_999, "scope": "user:1", "subject": f"{NFD} ", "content_class": "chat",
             "content": "restored", "created_at": "2024-01-01T00:00:00Z"}

    report = archive_restore(tenant=tenant, lines=[json.dumps(entry)])

    (restored,) = report.restored
    assert Record.objects.get(pk=restored["record_id"]).subject_id == kept.subject_id
    assert Subject.objects.count() == 1


@pytest.mark.django_db
def test_a_merged_subject_is_never_found_by_its_reference(tenant, chat):
    survivor = subject_get_or_create(tenant=tenant, ref=NFC)
    merged = Subject.objects.create(tenant=tenant, ref=NFC, merged_into=survivor)  # as memory 0011 leaves one

    assert subject_find(tenant=tenant, ref=NFD) == survivor
    assert subject_ids_find(tenant=tenant, refs=[NFD, NFC]) == {NFC: survivor.pk}
    assert subject_get_or_create(tenant=tenant, ref=NFD) == survivor
    assert merged.pk not in ForgetTarget.parse({"subject": NFC})._subject_ids(tenant)


# --- the property ----------------------------------------------------------------------------------------

# Letters that have a decomposed form (and their combining marks alone), other letters, and whitespace of
# several kinds, so that the NFD/NFC and whitespace variants are what the examples exercise.
_CHARS = st.sampled_from(list("éüñçåøÅÉabcXYZ019-_.@") + ["e\u0301", "u\u0308", "\u0301", "\u0308"])
_SPACE = st.sampled_from([" ", "  ", "\t", "\n", "\u00a0", "\u3000", "\u2003"])
_REF = st.lists(st.one_of(_CHARS, _SPACE), min_size=1, max_size=30).map("".join).filter(
    lambda s: s.strip() != "")


@st.composite
def _spellings(draw):
    """A reference and another spelling of it: another Unicode form, other whitespace around and inside."""
    base = draw(_REF)
    form = draw(st.sampled_from(["NFC", "NFD"]))
    words = unicodedata.normalize(form, base).split()
    gaps = draw(st.lists(_SPACE, min_size=len(words) - 1, max_size=len(words) - 1))
    edges = [draw(st.sampled_from(["", " ", "\t", "\u00a0"])) for _ in range(2)]
    return base, edges[0] + words[0] + "".join(g + w for g, w in zip(gaps, words[1:])) + edges[1]


@pytest.mark.django_db
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pair=_spellings(), other=_REF)
def test_any_two_refs_with_one_normal_form_reach_one_subject(tenant, pair, other):
    a, b = pair
    assert subject_ref_normalize(a) == subject_ref_normalize(b)

    first = subject_get_or_create(tenant=tenant, ref=a)

    assert subject_get_or_create(tenant=tenant, ref=b) == first
    assert subject_find(tenant=tenant, ref=b) == first
    assert ForgetTarget.parse({"subject": b})._subject_ids(tenant) == [first.pk]
    # and two refs with different normal forms reach different subjects
    assert (subject_get_or_create(tenant=tenant, ref=other) == first) == (
        subject_ref_normalize(other) == subject_ref_normalize(a))
