"""Tombstones are permanent: the database itself refuses to change or remove them, whoever asks."""
import sqlite3

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from tests.sqlite_service import manage, sqlite_env
from tombstones.models import Checkpoint, KeyEvent, LogHead, LogNode, SigningKey, Tombstone
from tombstones.services import checkpoint_sign

from .factories import tombstone_make

pytestmark = pytest.mark.django_db


def refused(sql: str, params=(), because: str = "permanent") -> bool:
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, params)
    except IntegrityError as exc:
        return because in str(exc)
    return False


@pytest.fixture
def logged(tenant):
    """The first of two tombstones: two leaves make the log's first stored node (leaves are not nodes)."""
    tombstone = tombstone_make(tenant)
    tombstone_make(tenant)
    checkpoint_sign()
    assert LogNode.objects.exists()
    return tombstone


@pytest.mark.parametrize("sql", [
    "UPDATE tombstones_tombstone SET payload = '\\x00'::bytea",
    "UPDATE tombstones_tombstone SET leaf_index = leaf_index + 1",
    "DELETE FROM tombstones_tombstone",
    "UPDATE tombstones_lognode SET hash = '\\x00'::bytea",
    "DELETE FROM tombstones_lognode",
    "UPDATE tombstones_checkpoint SET note = 'forged'",
    "DELETE FROM tombstones_checkpoint",
    "UPDATE tombstones_keyevent SET actor = 'someone else'",
    "DELETE FROM tombstones_keyevent",
    "DELETE FROM tombstones_signingkey",
    "UPDATE tombstones_signingkey SET public_key = '\\x00'::bytea",
    "UPDATE tombstones_signingkey SET kid = 'other'",
    "UPDATE tombstones_signingkey SET id = id + 1000",
    "DELETE FROM tombstones_loghead",
    "UPDATE tombstones_loghead SET size = 0",
])
def test_raw_sql_that_would_change_the_record_is_refused_by_the_database(logged, sql):
    assert refused(sql)
    assert Tombstone.objects.filter(pk=logged.pk, leaf_index=0).exists()


def test_orm_update_and_delete_of_a_tombstone_are_refused(logged):
    with pytest.raises(IntegrityError), transaction.atomic():
        Tombstone.objects.filter(pk=logged.pk).update(created_at=timezone.now())
    with pytest.raises(IntegrityError), transaction.atomic():
        Tombstone.objects.filter(pk=logged.pk).delete()
    with pytest.raises(IntegrityError), transaction.atomic():
        LogNode.objects.all().delete()
    assert Tombstone.objects.filter(pk=logged.pk).exists() and LogNode.objects.exists()


def test_a_key_can_be_retired_and_its_compromise_moved_earlier_but_not_undone(logged):
    key = SigningKey.objects.get(purpose="tombstone")
    now = timezone.now()
    SigningKey.objects.filter(pk=key.pk).update(retired_at=now, compromised_at=now)
    assert refused("UPDATE tombstones_signingkey SET retired_at = NULL WHERE id = %s", [key.pk])
    assert refused("UPDATE tombstones_signingkey SET compromised_at = NULL WHERE id = %s", [key.pk])
    assert refused("UPDATE tombstones_signingkey SET compromised_at = compromised_at + interval '1 day' "
                   "WHERE id = %s", [key.pk])
    SigningKey.objects.filter(pk=key.pk).update(compromised_at=now - timezone.timedelta(days=1))


def test_a_tenant_named_by_tombstones_cannot_be_deleted_or_renumbered(logged, tenant):
    """The tombstone's tenant has no foreign-key constraint (migration 0005): triggers refuse what its
    ON DELETE PROTECT refused; a tenant no tombstone names stays free to go."""
    from memory.models import Tenant

    assert refused("DELETE FROM memory_tenant WHERE id = %s", [tenant.pk], because="named by tombstones")
    assert refused("UPDATE memory_tenant SET id = id + 1000 WHERE id = %s", [tenant.pk], because="named by tombstones")
    assert not refused("UPDATE memory_tenant SET name = 'renamed' WHERE id = %s", [tenant.pk])
    other = Tenant.objects.create(name="no tombstones")
    assert not refused("UPDATE memory_tenant SET id = id + 1000 WHERE id = %s", [other.pk])
    assert not refused("DELETE FROM memory_tenant WHERE id = %s", [other.pk + 1000])
    assert Tenant.objects.filter(pk=tenant.pk).exists() and not Tenant.objects.filter(name="no tombstones").exists()


def test_the_log_head_moves_forward_only(logged):
    assert not refused("UPDATE tombstones_loghead SET updated_at = now()")
    assert refused("UPDATE tombstones_loghead SET size = size - 1")
    assert LogHead.objects.get(pk=1).size == 2
    assert Checkpoint.objects.exists() and KeyEvent.objects.exists()


def test_sqlite_triggers_refuse_the_same_changes(sqlite_migrated):
    """The embedded default (SQLite) gets the same triggers from the same migration."""
    manage("shell", "-c", "from tests.tombstones.factories import TenantFactory, tombstone_make\n"
                          "tenant = TenantFactory(); tombstone_make(tenant); tombstone_make(tenant)\n",
           env=sqlite_env(sqlite_migrated, LEDGER_SIGNING_PASSPHRASE="sqlite test"))
    db = sqlite3.connect(sqlite_migrated)
    assert db.execute("SELECT count(*) FROM tombstones_tombstone").fetchone() == (2,)
    assert db.execute("SELECT count(*) FROM tombstones_lognode").fetchone() == (1,)
    for sql in ["UPDATE tombstones_tombstone SET payload = x'00'", "DELETE FROM tombstones_tombstone",
                "DELETE FROM tombstones_lognode", "UPDATE tombstones_lognode SET hash = x'00'",
                "DELETE FROM tombstones_signingkey", "UPDATE tombstones_loghead SET size = 0",
                "DELETE FROM tombstones_loghead", "UPDATE tombstones_signingkey SET kid = 'x'",
                "UPDATE tombstones_signingkey SET id = id + 1000"]:
        with pytest.raises(sqlite3.IntegrityError, match="permanent"):
            db.execute(sql)
    for sql in ["DELETE FROM memory_tenant", "UPDATE memory_tenant SET id = id + 1000"]:
        with pytest.raises(sqlite3.IntegrityError, match="named by tombstones"):
            db.execute(sql)
    db.execute("UPDATE tombstones_signingkey SET retired_at = '2030-01-01 00:00:00'")
    assert db.execute("SELECT count(*) FROM tombstones_tombstone").fetchone() == (2,)
