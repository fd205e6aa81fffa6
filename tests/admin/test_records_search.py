"""The records list has a search (issue 21, item 8): a record by its id, a subject's records by a piece of the
reference; both by index (the primary key; the subjects' trigram index, then the records' subject index)."""
from __future__ import annotations

import re

import pytest

from tests.factories import ContentClassFactory, TenantFactory, record

pytestmark = pytest.mark.django_db


def listed(client, q: str) -> set[int]:
    html = client.get("/admin/memory/record/", {"q": q}).content.decode()
    return {int(m) for m in re.findall(r'field-id"><a href="/admin/memory/record/(\d+)/', html)}


def test_records_are_found_by_id_or_by_a_piece_of_the_subjects_reference(client_as, django_assert_max_num_queries):
    tenant = TenantFactory(name="acme")
    chat = ContentClassFactory(tenant=tenant, name="chat")
    first = record(tenant, chat, subject="cust-1001", content="a")
    second = record(tenant, chat, subject="cust-1002", content="b")
    other = record(tenant, chat, subject="vip-7", content="c")
    client = client_as("operator")
    client.get("/admin/")
    assert listed(client, "cust-100") == {first.pk, second.pk}
    assert listed(client, "CUST-1002") == {second.pk}
    assert listed(client, str(other.pk)) == {other.pk}
    assert listed(client, "nobody") == set() and listed(client, "\x00") == set()
    with django_assert_max_num_queries(13):  # the admin's own queries include the alerts' banner count
        assert client.get("/admin/memory/record/", {"q": "cust"}).status_code == 200
