from django.db import migrations, models


class Migration(migrations.Migration):
    """`workflow_started_at`, set by `workflow_start`; requests started before it have their mark from the
    history row that `workflow_start` wrote, so that a group's plan step finds them too."""

    dependencies = [("dsr", "0005_admin_queue_indexes")]

    operations = [
        migrations.AddField(model_name="subjectrequest", name="workflow_started_at",
                            field=models.DateTimeField(blank=True, null=True)),
        migrations.RunSQL(
            "UPDATE dsr_subjectrequest SET workflow_started_at = (SELECT min(h.at) FROM dsr_requesttransition h "
            "WHERE h.request_id = dsr_subjectrequest.id AND h.action = 'workflow_started') "
            "WHERE status = 'verified'",
            migrations.RunSQL.noop),
    ]
