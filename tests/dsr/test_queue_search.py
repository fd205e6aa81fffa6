"""Search in the request queue (issue 21, item 7): a piece of a subject's reference or the first digits of a
request id, answered by indexes (the subjects' trigram index of memory 0015, the requests' primary key)."""
from __future__ import annotations

import hashlib
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from dsr.models import RequestStatus, SubjectRequest
from memory.lookups import id_prefix_q
from memory.models import Subject
from memory.subjects import subject_ids_search
from tests.admin.conftest import client_as  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


def make(tenant, ref, pk=None):
    subject, _ = Subject.objects.get_or_create(tenant=tenant, ref=ref)
    now = timezone.now()
    return SubjectRequest.objects.create(pk=pk, tenant=tenant, subject=subject, type="erasure", regulation="gdpr",
                                         received_at=now, due_date=(now + timedelta(days=20)).date(),
                                         status=RequestStatus.RECEIVED)


def listed(client, q: str) -> set[int]:
    html = client.get("/admin/dsr/subjectrequest/", {"q": q}).content.decode()
    return {int(m) for m in re.findall(r'field-id"><a href="/admin/dsr/subjectrequest/(\d+)/', html)}


def test_queue_finds_requests_by_a_piece_of_the_reference_or_the_first_digits_of_the_id(tenant, client_as):  # noqa: F811
    # Given requests of cust-1001, CUST-1002 and someone else, with known ids
    first = make(tenant, "cust-1001", pk=1201)
    second = make(tenant, "CUST-1002", pk=1299)
    other = make(tenant, "vip-7", pk=130)
    twelve = make(tenant, "vip-8", pk=12)
    client = client_as("operator")
    # Then a prefix or a piece of the reference finds them, whatever the case
    assert listed(client, "cust-100") == {first.pk, second.pk}
    assert listed(client, "ust-1001") == {first.pk}
    assert listed(client, "vi") == {other.pk, twelve.pk}
    # and the first digits of an id find that id and the longer ones that start with them
    assert listed(client, "12") == {first.pk, second.pk, twelve.pk}
    assert listed(client, "130") == {other.pk}
    # and nothing odd breaks it
    assert listed(client, "%") == set() and listed(client, "0012") == set() and listed(client, "x\x00") == set()


def test_id_prefix_is_ranges_of_the_primary_key():
    q = id_prefix_q("12")
    assert ("pk", 12) in q.children and ("pk__range", (120, 129)) in q.children
    assert ("pk__range", (12 * 10**16, 13 * 10**16 - 1)) in q.children
    assert id_prefix_q("abc") is None and id_prefix_q("0") is None and id_prefix_q("1" * 19) is None


def test_subject_search_uses_the_trigram_index(tenant):
    if connection.vendor != "postgresql":
        pytest.skip("the plan is PostgreSQL's")
    # Given a table of varied references (a GIN index's new entries wait in its pending list until autovacuum
    # moves them into the index proper, as gin_clean_pending_list does here)
    Subject.objects.bulk_create([Subject(tenant=tenant, ref=hashlib.md5(str(n).encode()).hexdigest())
                                 for n in range(2000)] + [Subject(tenant=tenant, ref="cust-1001")])
    with connection.cursor() as cursor:
        cursor.execute("SELECT gin_clean_pending_list('subject_ref_upper_trgm_idx')")
        cursor.execute("ANALYZE memory_subject")
        cursor.execute("SET LOCAL enable_seqscan = off")
        for term in ("cust-10", "cu"):
            captured = []
            with connection.execute_wrapper(lambda execute, sql, params, many, context: (
                    captured.append((sql, params)), execute(sql, params, many, context))[1]):
                found = subject_ids_search(term)
            assert found
            sql, params = captured[-1]
            cursor.execute(f"EXPLAIN {sql}", params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            assert "subject_ref_upper_trgm_idx" in plan, plan


def test_a_database_owner_who_is_not_a_superuser_can_create_pg_trgm():
    """Production migrates as the tables' owner, not a superuser (README, database roles): memory 0015's
    CREATE EXTENSION must work for such a role (pg_trgm is a trusted extension)."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's extension")
    import psycopg

    params = connection.get_connection_params()
    base = {k: params[k] for k in ("host", "port", "user") if params.get(k)}
    name = f"{params['dbname']}_trgm"
    with psycopg.connect(**base, dbname="postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"DROP ROLE IF EXISTS {name}_owner")
        admin.execute(f"CREATE ROLE {name}_owner LOGIN NOSUPERUSER")
        admin.execute(f"CREATE DATABASE {name} OWNER {name}_owner")
        try:
            with psycopg.connect(**{**base, "user": f"{name}_owner"}, dbname=name, autocommit=True) as owner:
                owner.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
                assert owner.execute("SELECT 'cust-1001' % 'cust-100'").fetchone() == (True,)
        finally:
            admin.execute(f"DROP DATABASE IF EXISTS {name}")
            admin.execute(f"DROP ROLE IF EXISTS {name}_owner")
