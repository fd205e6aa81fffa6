"""An access request's plan says what the subject got (issue 21, item 5): items in the export are decided
`export` and `exported`, the rest `excluded` with the reason; progress then agrees with "completed". Migration
dsr 0013 settles the requests exported before."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from dsr.models import ItemDecision, ItemOutcome, RequestItem, RequestStatus
from dsr.selectors import request_progress
from memory.services import ForgetTarget, records_forget
from tests.dsr.test_workflow_steps import run_to_end
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request


@pytest.mark.django_db
def test_completed_access_request_has_every_exported_item_done_and_none_pending(mailoutbox):
    # Given a subject with live records, one hidden record, and derived artifacts
    scenario = erasure_scenario()
    records_forget(tenant=scenario.tenant, target=ForgetTarget(record_ids=(scenario.free[2].pk,)), mode="soft",
                   actor="t")
    request = verified_request(scenario, type="access")
    # When the access request runs
    run_to_end(request.pk)
    request.refresh_from_db()
    assert request.status == RequestStatus.COMPLETED
    # Then what is in the export is exported, and nothing is pending or "propagated"
    items = {(i.kind, i.object_id): i for i in RequestItem.objects.filter(request=request)}
    exported = {("record", r["id"]) for r in request.export["records"]} | {
        ("artifact", a["id"]) for a in request.export["derived"]}
    assert exported and all((items[key].decision, items[key].outcome) == (ItemDecision.EXPORT, ItemOutcome.EXPORTED)
                            for key in exported)
    rest = [i for key, i in items.items() if key not in exported]
    assert ("record", scenario.free[2].pk) in items and items[("record", scenario.free[2].pk)] in rest
    assert all(i.outcome == ItemOutcome.EXCLUDED and i.reason["code"] == "not_exported" for i in rest)
    assert not any(i.decision == ItemDecision.PROPAGATE or i.outcome == ItemOutcome.PENDING for i in items.values())
    progress = request_progress(request)
    assert progress.pending == 0 and progress.done == progress.planned == len(exported)


DSR_BEFORE = [("dsr", "0012_subject_refs_normalized")]


@pytest.mark.django_db(transaction=True)
def test_migration_settles_the_items_of_access_requests_exported_before():
    if connection.vendor != "postgresql":
        pytest.skip("run on PostgreSQL; the SQLite run is the embedded suite's")
    executor = MigrationExecutor(connection)
    leaves = executor.loader.graph.leaf_nodes()
    executor.migrate(DSR_BEFORE)
    apps = MigrationExecutor(connection).loader.project_state(DSR_BEFORE).apps
    Tenant, Subject = apps.get_model("memory", "Tenant"), apps.get_model("memory", "Subject")
    SubjectRequest, RequestItem_ = apps.get_model("dsr", "SubjectRequest"), apps.get_model("dsr", "RequestItem")
    tenant = Tenant.objects.create(name="m13")
    subject = Subject.objects.create(tenant=tenant, ref="cust-1")
    now = timezone.now()

    def request(**fields):
        return SubjectRequest.objects.create(tenant=tenant, subject=subject, type="access", regulation="gdpr",
                                             received_at=now, due_date=now.date(), **fields)

    answered = request(status="completed", export={"records": [{"id": 11}, {"id": 12}], "derived": [{"id": 21}]})
    never_ran = request(status="closed")
    erasure = SubjectRequest.objects.create(tenant=tenant, subject=subject, type="erasure", regulation="gdpr",
                                            received_at=now, due_date=now.date(), status="executing")
    for req, kind, object_id, decision in [
            (answered, "record", 11, ""), (answered, "record", 12, ""), (answered, "record", 13, ""),
            (answered, "artifact", 21, "propagate"), (answered, "artifact", 22, "propagate"),
            (never_ran, "record", 11, ""), (erasure, "record", 11, "erase")]:
        RequestItem_.objects.create(request=req, kind=kind, object_id=object_id, decision=decision, outcome="pending")

    MigrationExecutor(connection).migrate(leaves)

    def state(req):
        return {(i.kind, i.object_id): (i.decision, i.outcome)
                for i in RequestItem.objects.filter(request_id=req.pk)}
    assert state(answered) == {
        ("record", 11): ("export", "exported"), ("record", 12): ("export", "exported"),
        ("record", 13): ("", "excluded"), ("artifact", 21): ("export", "exported"), ("artifact", 22): ("", "excluded")}
    assert state(never_ran) == {("record", 11): ("", "pending")}  # never exported: nothing happened to it
    assert state(erasure) == {("record", 11): ("erase", "pending")}  # erasures are not touched
