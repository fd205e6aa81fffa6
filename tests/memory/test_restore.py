"""Restoring from an archive file (manage.py restore_archive): the deletion log is replayed first, so nothing
forgotten comes back, and every skipped line says why."""
from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.db import connection

from memory.models import ArchiveDeletion, Record, RecordTag
from memory.services import ForgetTarget, artifact_write, records_forget
from tests.factories import record

pytestmark = pytest.mark.django_db


def line(r: Record, **extra) -> str:
    return json.dumps({"id": r.pk, "scope": r.scope.path, "subject": r.subject.ref if r.subject else None,
                       "content_class": r.content_class.name, "content": r.content,
                       "created_at": r.created_at.isoformat(), "tier": r.tier, **extra})


def forget(tenant, records, mode):
    records_forget(tenant=tenant, target=ForgetTarget(record_ids=tuple(r.pk for r in records)), mode=mode,
                   actor="test", reason="test")


def restore(path, tenant, *extra) -> str:
    out = io.StringIO()
    call_command("restore_archive", str(path), "--tenant", tenant.name, *extra, stdout=out)
    return out.getvalue()


@pytest.fixture
def archive(tmp_path, tenant, chat):
    """An archive written before some of its records were forgotten in every way there is."""
    deleted, hidden, redacted, archived, live, lost = (
        record(tenant, chat, content=f"{name} content", subject=f"subject-{name}")
        for name in ("deleted", "hidden", "redacted", "archived", "live", "lost"))
    artifact_write(tenant=tenant, kind="archive", source_ids=[archived.pk], holder="s3://cold", content="copy")
    lines = [line(r) for r in (deleted, hidden, redacted, archived, live, lost)]
    forget(tenant, [deleted], "hard")
    forget(tenant, [hidden], "soft")
    forget(tenant, [redacted], "redact")
    forget(tenant, [archived], "hard")  # the archive copy goes into the deletion log
    # `lost` disappeared from the store without a forget (a disk failure): the archive is what restores it.
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM memory_record WHERE id = %s", [lost.pk])
    path = tmp_path / "archive.jsonl"
    path.write_text("\n".join(lines + ["not json", json.dumps({"id": 999})]) + "\n")
    return dict(path=path, deleted=deleted, hidden=hidden, redacted=redacted, archived=archived, live=live, lost=lost)


def test_restore_of_an_archive_holding_forgotten_records_brings_none_of_them_back(archive, tenant):
    assert ArchiveDeletion.objects.filter(record_id=archive["archived"].pk).exists()

    out = restore(archive["path"], tenant)

    forgotten = ("deleted", "hidden", "redacted", "archived")
    for name in forgotten:
        assert not Record.objects.filter(content=f"{name} content", forgotten_at__isnull=True).exists(), name
        assert f"(record {archive[name].pk}): forgotten:" in out
    assert "hard-deleted by forget" in out and "in the archive deletion log" in out
    assert f"(record {archive['live'].pk}): present:" in out
    assert out.count(": invalid:") == 2
    restored = Record.objects.get(content="lost content")
    assert restored.pk != archive["lost"].pk  # new ids: a forgotten or lost id is never reused
    assert restored.created_at == archive["lost"].created_at and restored.subject.ref == "subject-lost"
    assert RecordTag.objects.filter(record=restored, name=f"restored:{archive['lost'].pk}").exists()
    assert out.strip().endswith("restored 1 records; skipped 7 (4 forgotten)")


def test_restoring_the_same_archive_twice_restores_nothing_more(archive, tenant):
    restore(archive["path"], tenant)

    out = restore(archive["path"], tenant)

    assert Record.objects.filter(content="lost content").count() == 1
    assert f"(record {archive['lost'].pk}): already_restored:" in out


def test_a_dry_run_restores_nothing(archive, tenant):
    before = Record.objects.count()

    out = restore(archive["path"], tenant, "--dry-run")

    assert Record.objects.count() == before and f"would restore record {archive['lost'].pk}" in out


def test_a_record_whose_commitment_a_forget_signed_is_not_restored_under_another_id(tenant, chat, tmp_path):
    secret = record(tenant, chat, content="my secret")
    forget(tenant, [secret], "hard")
    path = tmp_path / "other.jsonl"
    path.write_text(json.dumps({"id": 424242, "scope": "user:1", "content_class": "chat", "content": "my secret",
                                "created_at": secret.created_at.isoformat(), "commitment": secret.commitment}) + "\n")

    out = restore(path, tenant)

    assert "forgotten: its content commitment is listed in tombstone" in out
    assert not Record.objects.filter(content="my secret").exists()
