"""Subject requests follow the subjects memory migration 0011 merged.

Memory 0011 found subjects of a tenant whose references differ only in Unicode form or whitespace (the NFD
and the NFC spelling of "José Müller"), kept the oldest, and moved the others' records and holds to it. A
request received under a merged spelling moves too: the erasure workflow plans the records of
`request.subject`, and they are all on the surviving subject now. The request's reference needs no
rewriting of its own: it is the subject's.

Reversing changes nothing (memory 0011 refuses to be reversed once it merged anything).
"""
from django.db import migrations


def requests_follow_merged_subjects(apps, schema_editor) -> None:
    Subject = apps.get_model("memory", "Subject")
    SubjectRequest = apps.get_model("dsr", "SubjectRequest")
    by_survivor: dict[int, list[int]] = {}
    for pk, survivor in Subject.objects.filter(merged_into__isnull=False).values_list("pk", "merged_into_id"):
        by_survivor.setdefault(survivor, []).append(pk)
    for survivor, merged in by_survivor.items():
        SubjectRequest.objects.filter(subject_id__in=merged).update(subject_id=survivor)


class Migration(migrations.Migration):

    dependencies = [
        ("dsr", "0011_notice_receipt_lz4"),
        ("memory", "0011_subject_refs_normalized"),
    ]

    operations = [
        migrations.RunPython(requests_follow_merged_subjects, migrations.RunPython.noop),
    ]
