"""Subject references in normal form, and the subjects that were one person spelled two ways merged.

Before this migration a reference was compared byte for byte: records written under the NFD spelling of
"José Müller" and an erasure request or a legal hold made under the NFC spelling named two subjects, and
the request erased nothing, the hold covered nothing. From now on every path normalizes a reference
(memory.subjects.subject_ref_normalize: NFC, whitespace trimmed and collapsed, case kept). This migration
brings the rows at rest to that form:

1. `Subject.merged_into` is added, and the uniqueness of (tenant, ref) holds among the subjects that are not
   merged (a partial unique index).
2. Every reference is rewritten in normal form. Where two or more subjects of a tenant have the same normal
   form they are one person: the oldest (created_at, then id) stays, the others get `merged_into` = the
   oldest and its reference (a lookup by reference never finds a merged subject).
3. What names a merged subject moves to the one it was merged into, so that a hold, a forget or an erasure
   request for that person covers every record of every spelling, and the lock computation, the guard and
   the erasure workflow keep comparing plain `subject_id`s:
     - records (`memory_record.subject_id`), the locked and held ones included. The guard trigger refuses
       an UPDATE of `subject_id` on a locked record (memory 0003), because moving a record to another
       subject could take it out of a hold. Here it moves to the same person's surviving subject, which
       only ever adds coverage, so the UPDATE triggers of memory_record are suspended for that one
       statement and put back as they were, in the same transaction (PostgreSQL: disabled, then enabled
       again as they were, ALWAYS or not; SQLite cannot disable a trigger: dropped, then created again from
       its own text). The migration runs as the tables' owner and the DDL is transactional: no other
       transaction sees the table without its guard, and a failure rolls the suspension back with the
       rest. Nothing else of a record changes: not its lock (`held`, `retained_until`,
       `lock_protects_content`), content, commitment or timestamps;
     - legal holds on a subject (`retention_legalhold.subject_id`), released ones too, the same way (so
       that the move holds whether or not retention's append-only triggers are already there);
     - then every record of a surviving subject that an active hold on it now covers gets `held` = true:
       a hold on the NFC spelling covers the records written under the NFD one. A lock is only raised
       here, never lowered (raising needs no consent from the guard);
     - subject requests follow in dsr migration 0012.
4. What is history keeps the id it was written with: the write ledger (retention.WriteLedgerEntry,
   append-only) and the signed tombstones. That is why merged subjects are kept rather than deleted: the
   coverage audit (retention.audit) reads a ledger row's subject through `merged_into`, so a hold on the
   surviving subject covers the records the ledger has under a merged one.

A reference that has no valid normal form (a control character other than whitespace, or more than 200
characters once in NFC: a few characters take two code points in NFC) is left as it is. Old writes
accepted such references; lookups and new writes refuse them, so nothing reaches that subject again by
its reference, and nothing could be merged with it.

The normal form is repeated below rather than imported: a migration does not import code that may change
after it is applied (tests/memory/test_subject_refs_migration.py checks that the two agree).
Reversing is refused once subjects were merged (which spelling each record had is gone), and is a no-op
otherwise (references in normal form were valid before too).
"""
import re
import unicodedata
from contextlib import contextmanager

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import Q

MAX_CHARS = 200
# Control characters that are not whitespace, and surrogates: refused.
REFUSED = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff]")
BATCH = 1000  # rows per bulk_update and per `ref IN (...)` (SQLite's variable limit is 32766 here)


def normal_form(ref: str) -> str | None:
    """memory.subjects.subject_ref_normalize as of this migration; None where that refuses the reference."""
    if REFUSED.search(ref):
        return None
    normal = " ".join(unicodedata.normalize("NFC", ref).split())
    return normal if 0 < len(normal) <= MAX_CHARS else None


# --- the guard's UPDATE triggers, suspended for one statement ---------------------------------------------

PG_UPDATE_TRIGGERS = """
SELECT tgname, tgenabled FROM pg_trigger
WHERE tgrelid = to_regclass(%s) AND NOT tgisinternal AND (tgtype & 16) <> 0 AND tgenabled <> 'D'
ORDER BY tgname
"""
PG_ENABLE = {"O": "ENABLE TRIGGER", "A": "ENABLE ALWAYS TRIGGER", "R": "ENABLE REPLICA TRIGGER"}
SQLITE_UPDATE_TRIGGER = re.compile(r"\b(BEFORE|AFTER|INSTEAD\s+OF)\s+UPDATE\b", re.IGNORECASE)


@contextmanager
def update_triggers_suspended(schema_editor, table: str):
    """Inside the block, UPDATE triggers of `table` do not fire; after it they are as they were. Nothing is
    restored on an error: the migration's transaction rolls back, the suspension with it."""
    connection, q = schema_editor.connection, schema_editor.quote_name
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(PG_UPDATE_TRIGGERS, [table])
            triggers = cursor.fetchall()
            for name, _ in triggers:
                cursor.execute(f"ALTER TABLE {q(table)} DISABLE TRIGGER {q(name)}")
        else:
            # SQLite cannot disable a trigger: drop it and create it again from its own text.
            cursor.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s "
                           "ORDER BY name", [table])
            triggers = [(name, sql) for name, sql in cursor.fetchall() if SQLITE_UPDATE_TRIGGER.search(sql)]
            for name, _ in triggers:
                cursor.execute(f"DROP TRIGGER {q(name)}")
    yield
    with connection.cursor() as cursor:
        for name, state in triggers:
            if connection.vendor == "postgresql":
                cursor.execute(f"ALTER TABLE {q(table)} {PG_ENABLE[state]} {q(name)}")
            else:
                cursor.execute(state)


# --- the data --------------------------------------------------------------------------------------------

def _groups(Subject) -> dict[tuple[int, str], list[tuple]]:
    """(tenant, normal form) -> [(created_at, id, ref)] for every normal form that some row does not spell
    exactly so: those rows, and the rows that already do."""
    changed: dict[int, str] = {}
    for pk, ref in Subject.objects.order_by().values_list("pk", "ref").iterator(chunk_size=10_000):
        normal = normal_form(ref)
        if normal is not None and normal != ref:
            changed[pk] = normal
    groups: dict[tuple[int, str], list[tuple]] = {}
    ids = sorted(changed)
    for start in range(0, len(ids), BATCH):
        for pk, tenant_id, created_at, ref in Subject.objects.filter(pk__in=ids[start:start + BATCH]).values_list(
                "pk", "tenant_id", "created_at", "ref"):
            groups.setdefault((tenant_id, changed[pk]), []).append((created_at, pk, ref))
    normals = sorted({normal for _, normal in groups})
    for start in range(0, len(normals), BATCH):
        for pk, tenant_id, created_at, ref in Subject.objects.filter(ref__in=normals[start:start + BATCH]).values_list(
                "pk", "tenant_id", "created_at", "ref"):
            if (tenant_id, ref) in groups:
                groups[(tenant_id, ref)].append((created_at, pk, ref))
    return groups


def subjects_normalize(apps, schema_editor) -> None:
    Subject = apps.get_model("memory", "Subject")
    Record = apps.get_model("memory", "Record")
    LegalHold = apps.get_model("retention", "LegalHold")
    if schema_editor.connection.vendor == "postgresql":
        # Foreign keys are checked at COMMIT by default: rows this step updates would leave trigger events
        # pending, and PostgreSQL refuses to ALTER a table with pending events (the triggers below, the
        # unique index after this step).
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    updates, merged_into = [], {}
    for (_, normal), rows in _groups(Subject).items():
        rows.sort()
        survivor = rows[0][1]
        for _, pk, ref in rows:
            if pk != survivor:
                merged_into[pk] = survivor
            if pk != survivor or ref != normal:
                updates.append(Subject(pk=pk, ref=normal, merged_into_id=merged_into.get(pk)))
    Subject.objects.bulk_update(updates, ["ref", "merged_into"], batch_size=BATCH)
    if not merged_into:
        return
    by_survivor: dict[int, list[int]] = {}
    for pk, survivor in merged_into.items():
        by_survivor.setdefault(survivor, []).append(pk)
    with update_triggers_suspended(schema_editor, "memory_record"):
        for survivor, merged in by_survivor.items():
            Record.objects.filter(subject_id__in=merged).update(subject_id=survivor)
    with update_triggers_suspended(schema_editor, "retention_legalhold"):
        for survivor, merged in by_survivor.items():
            LegalHold.objects.filter(subject_id__in=merged).update(subject_id=survivor)
    held = set(LegalHold.objects.filter(subject_id__in=list(by_survivor), released_at__isnull=True)
               .values_list("subject_id", flat=True))
    for survivor in sorted(held):
        Record.objects.filter(subject_id=survivor, held=False).update(held=True)


def subjects_unmerge_refused(apps, schema_editor) -> None:
    Subject = apps.get_model("memory", "Subject")
    if Subject.objects.filter(merged_into__isnull=False).exists():
        raise RuntimeError("memory 0011 merged subjects whose references differed only in Unicode form or "
                           "whitespace, and moved their records to one subject; which spelling each record had "
                           "is not kept, so this cannot be undone")


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0013_locks_computed_by_database"),
        ("retention", "0004_audit_tombstone_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="subject",
            name="merged_into",
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT,
                                    related_name="merged", to="memory.subject"),
        ),
        migrations.RemoveConstraint(model_name="subject", name="subject_unique_ref"),
        migrations.RunPython(subjects_normalize, subjects_unmerge_refused),
        migrations.AddConstraint(
            model_name="subject",
            constraint=models.UniqueConstraint(condition=Q(merged_into__isnull=True), fields=("tenant", "ref"),
                                               name="subject_unique_ref"),
        ),
    ]
