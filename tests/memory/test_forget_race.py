"""A hold placed by another transaction while a forget is between its decision and its destructive
statements: the record is never destroyed, and the answer says why (the forget decides again)."""
import threading

import pytest
from django.db import connection

from memory.models import Record
from memory.services import ForgetTarget, forget as forget_module, records_forget
from retention.services import hold_place
from tests.factories import ContentClassFactory, TenantFactory, record

pytestmark = pytest.mark.django_db(transaction=True)


def test_hold_placed_mid_forget_is_never_destroyed(monkeypatch):
    tenant = TenantFactory(name="racing")
    chat = ContentClassFactory(tenant=tenant, name="chat")
    victims = [record(tenant, chat, content=f"r{i}", subject="s-1") for i in range(3)]
    original = forget_module._tombstone_issue
    placed = []

    def tombstone_then_hold(**kwargs):
        issued = original(**kwargs)
        if not placed:
            # Another session places a hold on one record and commits, after this forget decided.
            def place():
                hold_place(tenant=tenant, matter="late matter", record_ids=[victims[1].pk], actor="legal")
                connection.close()
            thread = threading.Thread(target=place)
            thread.start()
            thread.join()
            placed.append(True)
        return issued

    monkeypatch.setattr(forget_module, "_tombstone_issue", tombstone_then_hold)

    result = records_forget(tenant=tenant, target=ForgetTarget(subjects=("s-1",)), mode="hard", actor="t")

    assert placed
    assert result.status == "partial"
    outcomes = {r["record_id"]: r["outcome"] for r in result.results}
    assert outcomes == {victims[0].pk: "deleted", victims[1].pk: "refused", victims[2].pk: "deleted"}
    assert Record.objects.get(pk=victims[1].pk).content == "r1"
