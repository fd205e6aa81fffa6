# The workflow's claims read only requests not yet notified (dsr/models.py says why).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('dsr', '0007_workflow_resume_schedule'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='subjectrequest',
            index=models.Index(condition=models.Q(('notified_at__isnull', True)), fields=['tenant', 'status', 'id'], name='request_in_flight_idx'),
        ),
    ]
