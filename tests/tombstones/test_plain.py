"""The verification page's words (tombstones/plain.py): dates a person reads, what happened in words, correct
plurals, authorities said to the person; the codes only in the details section (issue 21, item 2)."""
import re

import pytest

from tombstones import plain
from tombstones.vocabulary import ARTIFACT_KINDS, AUTHORITIES


@pytest.mark.parametrize("value, words", [
    ("2026-12-05T09:07:52.403911+00:00", "5 December 2026, 09:07 UTC"),
    ("2026-03-01T00:00:00Z", "1 March 2026, 00:00 UTC"),
    ("2026-12-05T10:07:52+01:00", "5 December 2026, 09:07 UTC"),  # another zone, said in UTC
    ("2026-12-05T09:07:00", "5 December 2026, 09:07"),  # no zone: none claimed
    ("not a time", "not a time"),
    (None, "—"),
])
def test_times_read_as_a_person_reads_them_with_the_zone(value, words):
    assert plain.when(value) == words


@pytest.mark.parametrize("n, noun, words", [
    (1, "record", "1 record"), (3, "record", "3 records"), (8, "embedding", "8 embeddings"),
    (1, "embedding", "1 embedding"), (2, "summary", "2 summaries"), (2, "cache", "2 cache entries"),
    (2, "archive", "2 archive copies"), (2, "fleet_copy", "2 copies held by other agents"),
    (0, "record", "0 records"),
])
def test_plurals_agree_with_the_count(n, noun, words):
    assert plain.plural(n, noun) == words


def test_every_artifact_kind_has_its_own_words():
    for kind in ARTIFACT_KINDS:
        assert "_" not in plain.plural(2, kind)


def summary(**overrides) -> dict:
    base = {"tombstone_id": "0b5e0000-0000-4000-8000-000000000000", "time": "2026-12-05T09:07:52.403911+00:00",
            "version": 2, "authority": "GDPR Art. 17", "request_path": "erasure_workflow", "mode": "soft",
            "target_kind": ["record_ids"], "records": 3, "records_by_outcome": {"deleted": 3},
            "records_by_tier": {"hot": 3}, "derivatives": 8, "derivatives_by_kind": {"embedding": 8},
            "derivatives_by_outcome": {"deleted": 8}, "deferred": 0, "deferred_deadlines": [],
            "deferred_undated": 0, "key_id": "abc", "log_origin": "o", "leaf_index": 4, "checkpoint_size": 9,
            "checkpoint_time": "2026-12-05T09:08:00Z"}
    return {**base, **overrides}


def test_what_happened_is_said_in_words():
    words = plain.tombstone_words(summary())
    assert words["records"] == "3 records erased."
    assert words["derived"] == "Copies derived from them (8 embeddings) also erased."
    assert words["when"] == "5 December 2026, 09:07 UTC"
    assert words["authority"].startswith("You asked us to erase your data")
    assert words["deferred"] == "Nothing left to do."
    assert words["logged"] == "Entry 4 of 9 in our public log, under a checkpoint signed 5 December 2026, 09:08 UTC."


def test_the_sentences_carry_no_codes_which_stay_in_the_details():
    words = plain.tombstone_words(summary(records=5, records_by_outcome={"deleted": 3, "hidden": 2},
                                          deferred=3, deferred_deadlines=["2026-03-01T00:00:00Z"], deferred_undated=1))
    sentences = " ".join(str(v) for k, v in words.items() if k not in ("codes", "tombstone_id"))
    for code in ("erasure_workflow", "record_ids", "soft", "hot", "T09:07", "GDPR Art. 17", "_"):
        assert code not in sentences, code
    assert words["records"].startswith("5 records: 3 erased, 2 hidden from every use")
    assert words["deferred"] == ("2 steps still to finish, by 1 March 2026, 00:00 UTC; 1 step waiting until a "
                                 "legal hold is released.")
    codes = dict(words["codes"])
    assert codes["Mode"] == "soft" and codes["Storage tiers"] == "3 hot"
    assert codes["Requested through"] == "erasure_workflow (target: record_ids)"


def test_an_agents_forget_says_you_asked():
    assert plain.authority("memory forget").startswith("You asked")


@pytest.mark.parametrize("value", sorted(AUTHORITIES) + ["retention_rule:12", "retention_conflict:7"])
def test_every_authority_of_the_vocabulary_has_words(value):
    words = plain.authority(value)
    assert words != value and words.endswith(".") and not re.search(r"\b(user|actor)\b", words)


def test_mixed_derivative_outcomes_are_counted_each():
    words = plain.derived(summary(derivatives=3, derivatives_by_kind={"summary": 1, "embedding": 2},
                                  derivatives_by_outcome={"deleted": 2, "hidden": 1}))
    assert words == "Copies derived from them (2 embeddings, 1 summary) also handled: 2 erased, 1 hidden from every use."
