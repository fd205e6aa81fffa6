"""Access requests' plans say what the subject got (issue 21, item 5).

Before this migration an access request was planned with the erasure's planner and then only exported:
its items stayed `pending`, artifacts decided `propagate`, while the request said `completed`. Its page
showed "0 done, 17 pending" for a request that had been answered. From now on the workflow settles the plan
when it makes the export (dsr.services.workflow.access_items_settle); this migration does the same to the
access requests exported before:

- an item whose record or artifact is in the request's export (`SubjectRequest.export`, kept as it was
  sent): decision `export`, outcome `exported`. That is a fact the export itself proves;
- the other items of an exported request were planned but not given to the subject (hidden or forgotten
  records, embeddings, which the export leaves out): outcome `excluded`, no decision, with the reason. They
  are not deleted (the plan is part of the request's record), not called done, and not left `pending`,
  which would say that something is still to happen;
- an access request without an export (never exported: refused, closed before it ran) is left as it is: its
  items, if any, were never acted on, and `pending` is the truth about them.

The rules are repeated here, not imported (a migration must not change when the code does). Reversing
puts the items back as they were written (pending; artifacts `propagate`).
"""
from django.db import migrations, models

BATCH = 5000  # ids per UPDATE: under any bound-parameter limit
NOT_EXPORTED = {"code": "not_exported",
                "detail": "Not live data when the export was made (hidden or forgotten, or an embedding: numbers "
                          "derived from records, not readable data)."}


def _batches(ids):
    for start in range(0, len(ids), BATCH):
        yield ids[start:start + BATCH]


def access_items_exported(apps, schema_editor):
    SubjectRequest = apps.get_model("dsr", "SubjectRequest")
    RequestItem = apps.get_model("dsr", "RequestItem")
    exported = SubjectRequest.objects.filter(type="access", export__isnull=False).values_list("pk", "export")
    for request_id, export in exported.iterator(chunk_size=100):
        if not isinstance(export, dict):
            continue
        items = RequestItem.objects.filter(request_id=request_id)
        for kind, entries in (("record", export.get("records") or []), ("artifact", export.get("derived") or [])):
            ids = [entry["id"] for entry in entries if isinstance(entry, dict) and isinstance(entry.get("id"), int)]
            for batch in _batches(ids):
                items.filter(kind=kind, object_id__in=batch).update(decision="export", outcome="exported")
        items.filter(outcome="pending").update(decision="", outcome="excluded", reason=NOT_EXPORTED)


def access_items_pending(apps, schema_editor):
    SubjectRequest = apps.get_model("dsr", "SubjectRequest")
    RequestItem = apps.get_model("dsr", "RequestItem")
    items = RequestItem.objects.filter(request__in=SubjectRequest.objects.filter(type="access"),
                                       outcome__in=["exported", "excluded"])
    items.filter(kind="record").update(decision="", outcome="pending", reason=None)
    items.filter(kind="artifact").update(decision="propagate", outcome="pending", reason=None)


class Migration(migrations.Migration):

    dependencies = [
        ("dsr", "0012_subject_refs_normalized"),
    ]

    operations = [
        migrations.AlterField(
            model_name="requestitem",
            name="decision",
            field=models.CharField(blank=True, choices=[("erase", "Erase"), ("redact", "Redact"), ("hide", "Hide"),
                                                        ("propagate", "Propagate"), ("export", "Export")],
                                   max_length=9),
        ),
        migrations.AlterField(
            model_name="requestitem",
            name="outcome",
            field=models.CharField(choices=[("pending", "Pending"), ("deleted", "Deleted"), ("redacted", "Redacted"),
                                            ("hidden", "Hidden"), ("notified", "Notified"), ("logged", "Logged"),
                                            ("gone", "Gone"), ("exported", "Exported"), ("excluded", "Excluded")],
                                   default="pending", max_length=8),
        ),
        migrations.RunPython(access_items_exported, access_items_pending),
    ]
