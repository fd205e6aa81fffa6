"""What a tombstone says, in the words of the person whose data it is (the verification page). Pure: no Django.

`statement_summary` (tombstones/verification.py) gives counts, kinds, codes and ISO times; these functions turn
them into sentences: dates as a person reads them with their time zone, what happened to the data, on what
authority. The codes stay available to the page's "technical details" section (`codes`), never in the sentences.
"""
from __future__ import annotations

from datetime import datetime, timezone

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")

# (one, many) for the things a statement counts: records and the kinds of derived copies (vocabulary.py).
NOUNS = {
    "record": ("record", "records"),
    "summary": ("summary", "summaries"),
    "embedding": ("embedding", "embeddings"),
    "cache": ("cache entry", "cache entries"),
    "archive": ("archive copy", "archive copies"),
    "fleet_copy": ("copy held by another agent", "copies held by other agents"),
    "step": ("step", "steps"),
}

# What happened to a record, per outcome (a statement's `execution.records[].outcome`).
RECORD_OUTCOMES = {
    "deleted": "erased",
    "redacted": "with their content erased (that they existed is kept, as the law requires)",
    "hidden": "hidden from every use, their content to be erased later",
    "refused": "kept, because the law or a legal hold requires it",
}
# ... and to a derived copy (`propagation.derivatives[].outcome`), after "also".
DERIVATIVE_OUTCOMES = {"deleted": "erased", "redacted": "emptied of their content", "hidden": "hidden from every use"}

# On what authority, as the person reads it: a statement's `request.authority` (tombstones/vocabulary.py).
AUTHORITIES = {
    "GDPR Art. 17": "You asked us to erase your data (GDPR Article 17, the right to erasure).",
    "GDPR Art. 15": "You asked for a copy of your data (GDPR Article 15, the right of access).",
    "GDPR Art. 18": "You asked us to restrict the use of your data (GDPR Article 18).",
    "CCPA §1798.105": "You asked us to delete your personal information (CCPA §1798.105).",
    "CCPA §1798.110": "You asked what personal information we hold about you (CCPA §1798.110).",
    "CCPA §1798.120": "You asked us not to sell or share your personal information (CCPA §1798.120).",
    "Erasure request": "You asked us to erase your data.",
    "Access request": "You asked for a copy of your data.",
    "Restriction request": "You asked us to restrict the use of your data.",
    "memory forget": "You asked for it to be forgotten, through an assistant that uses our memory service.",
    "compaction of hidden records (their retention ended)": (
        "Our regular clean-up: these records were hidden earlier, and no law requires us to keep them any longer."),
}
AUTHORITY_REFERENCES = {
    "retention_rule": "Their retention period ended (rule {n} of our signed retention table).",
    "retention_conflict": "Our legal team decided it (retention conflict {n}).",
}


def plural(n: int, noun: str) -> str:
    """`n` and the noun in the right number: "1 record", "8 embeddings", "2 summaries"."""
    one, many = NOUNS.get(noun, (noun.replace("_", " "), noun.replace("_", " ") + "s"))
    return f"{n} {one if n == 1 else many}"


def when(value: str | None) -> str:
    """An ISO 8601 time as a person reads it, in UTC, saying so: "5 December 2026, 09:07 UTC". Anything that is
    not such a time is given back as it is (a version 1 statement's time is still shown)."""
    if not value:
        return "—"
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except (TypeError, ValueError):
        return str(value)
    if moment.tzinfo is None:  # a time without its zone: shown without claiming one
        return f"{moment.day} {MONTHS[moment.month - 1]} {moment.year}, {moment:%H:%M}"
    moment = moment.astimezone(timezone.utc)
    return f"{moment.day} {MONTHS[moment.month - 1]} {moment.year}, {moment:%H:%M} UTC"


def authority(value: str | None) -> str:
    """On what authority, in words: "You asked us to erase your data (GDPR Article 17, …)."."""
    if not value:
        return "Not given."
    if value in AUTHORITIES:
        return AUTHORITIES[value]
    kind, _, number = value.partition(":")
    if kind in AUTHORITY_REFERENCES and number.isdigit():
        return AUTHORITY_REFERENCES[kind].format(n=number)
    return value  # "(not shown: …)" of a version 1 statement, as the summary gives it


def _counted(total: int, noun: str, by_outcome: dict[str, int], words: dict[str, str]) -> str:
    """"3 records erased", or "5 records: 3 erased, 2 hidden from every use…" when outcomes differ."""
    parts = [(n, words.get(outcome, outcome)) for outcome, n in by_outcome.items() if n]
    if len(parts) == 1:
        return f"{plural(total, noun)} {parts[0][1]}"
    return f"{plural(total, noun)}: " + ", ".join(f"{n} {phrase}" for n, phrase in parts)


def records(summary: dict) -> str:
    """What happened to the person's records: "3 records erased"."""
    if not summary.get("records"):
        return "No records."
    return _counted(summary["records"], "record", summary.get("records_by_outcome") or {}, RECORD_OUTCOMES) + "."


def derived(summary: dict) -> str | None:
    """What happened to copies derived from them: "Copies derived from them (8 embeddings) also erased."."""
    if not summary.get("derivatives"):
        return None
    kinds = ", ".join(plural(n, kind) for kind, n in sorted((summary.get("derivatives_by_kind") or {}).items()))
    outcomes = {o: n for o, n in (summary.get("derivatives_by_outcome") or {}).items() if n}
    if len(outcomes) == 1:
        (outcome,) = outcomes
        return f"Copies derived from them ({kinds}) also {DERIVATIVE_OUTCOMES.get(outcome, outcome)}."
    return (f"Copies derived from them ({kinds}) also handled: "
            + ", ".join(f"{n} {DERIVATIVE_OUTCOMES.get(o, o)}" for o, n in outcomes.items()) + ".")


def deferred(summary: dict) -> str:
    """What is left to do, and by when: "1 step still to finish, by 1 March 2026, 00:00 UTC."."""
    total = summary.get("deferred") or 0
    if not total:
        return "Nothing left to do."
    undated = summary.get("deferred_undated") or 0
    parts = []
    deadlines = summary.get("deferred_deadlines") or []
    if total - undated:
        by = ("by a date to come" if not deadlines else f"by {when(deadlines[0])}" if len(deadlines) == 1
              else f"between {when(deadlines[0])} and {when(deadlines[-1])}")
        parts.append(f"{plural(total - undated, 'step')} still to finish, {by}")
    if undated:
        parts.append(f"{plural(undated, 'step')} waiting until a legal hold is released")
    return "; ".join(parts) + "."


def codes(summary: dict) -> list[tuple[str, str]]:
    """The statement's codes, as signed, for the "technical details" section: (label, value) pairs."""
    def counts(by: dict | None) -> str:
        return ", ".join(f"{n} {key}" for key, n in (by or {}).items()) or "—"

    target = ", ".join(summary.get("target_kind") or []) or "—"
    return [
        ("Time (ISO 8601)", str(summary.get("time") or "—")),
        ("Authority (as signed)", str(summary.get("authority") or "—")),
        ("Requested through", f"{summary.get('request_path') or '—'} (target: {target})"),
        ("Mode", str(summary.get("mode") or "—")),
        ("Statement version", str(summary.get("version") or "—")),
        ("Records by outcome", counts(summary.get("records_by_outcome"))),
        ("Storage tiers", counts(summary.get("records_by_tier"))),
        ("Derived copies by kind", counts(summary.get("derivatives_by_kind"))),
        ("Derived copies by outcome", counts(summary.get("derivatives_by_outcome"))),
        ("Deferred deadlines", ", ".join(f"due {d}" for d in summary.get("deferred_deadlines") or []) or "—"),
        ("Signed with key", str(summary.get("key_id") or "—")),
        ("Log", f"leaf {summary.get('leaf_index')} of a tree of {summary.get('checkpoint_size')}, checkpoint time "
                f"{summary.get('checkpoint_time') or '—'}"),
    ]


def tombstone_words(summary: dict) -> dict:
    """Everything the page says about one tombstone, in words, and its codes for the details section."""
    return {
        "tombstone_id": summary.get("tombstone_id"),
        "when": when(summary.get("time")),
        "authority": authority(summary.get("authority")),
        "records": records(summary),
        "derived": derived(summary),
        "deferred": deferred(summary),
        "logged": (f"Entry {summary.get('leaf_index')} of {summary.get('checkpoint_size')} in our public log, "
                   f"under a checkpoint signed {when(summary.get('checkpoint_time'))}."),
        "codes": codes(summary),
    }
