"""DeletedRecord's tenant and scope lose their foreign-key constraints and their indexes in the database.

A hard forget writes one DeletedRecord per deleted record, in the same statement as the DELETE: `WITH gone AS
(DELETE FROM memory_record ... RETURNING id, tenant_id, scope_id) INSERT INTO memory_deletedrecord ... FROM
gone` (memory/services/forget.py). The values are copied from the row being deleted, whose own foreign keys
to the same tenant and scope are checked, so PostgreSQL's deferred check of each new row at COMMIT (two per
record: ~1 s per 100,000 purged records, bench/bench_compaction.py) verified nothing new. Nothing reads the
table by tenant or by scope (the 410 answers and restores look rows up by record id, confirmations by forget
event), so the two indexes only cost every INSERT (~0.25 s per 100,000).

What the constraints also did: refuse the deletion of a tenant or scope that a DeletedRecord names. Django's
PROTECT still refuses it for every ORM path (tests/memory/test_sweeps.py), the admin offers no delete of
either, and the database still refuses a tenant's deletion (the forget event that deleted the record keeps its
foreign key to the tenant, and forget events are permanent: migration 0007). A scope deleted with raw SQL
would leave DeletedRecord rows naming a scope id that no longer exists; no code resolves that id to a row
(confirmation probes use it to look for descendants, and find none).

Plain AlterField on both databases: memory_deletedrecord has no triggers, so SQLite re-creating it is harmless.
"""
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0008_sweep_claim_index'),
    ]

    operations = [
        migrations.AlterField(
            model_name='deletedrecord',
            name='scope',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='memory.scope'),
        ),
        migrations.AlterField(
            model_name='deletedrecord',
            name='tenant',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='memory.tenant'),
        ),
    ]
