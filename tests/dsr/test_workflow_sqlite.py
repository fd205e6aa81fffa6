"""The erasure workflow's steps on SQLite, the embedded default, where several of them take paths of their
own (no `json_to_recordset`, no `unnest`, no binary COPY: `bulk_create` and per-outcome UPDATEs), and the
receipts' proofs are read from the stored tree by the ORM.

The database is built as the embedded service builds it (`manage.py migrate` in a subprocess, with
DATABASE_URL naming a SQLite file: tests/sqlite_service.py); the issue's scenario
(tests/dsr/workflow_fixtures.py) is then run step by step in a `manage.py shell`, which prints what the test
checks.
"""
from __future__ import annotations

from tests.sqlite_service import manage_script, sqlite_env

LOCMEM_MAIL = "django.core.mail.backends.locmem.EmailBackend"

RUN = r"""
import json
from dsr.models import RequestItem, RetentionConflict, SubjectNotice
from dsr.services import notify, workflow
from memory.models import DerivedArtifact, Record
from tombstones.services.receipts import receipts_build, tombstone_verify
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request

steps = {"plan": workflow.step_plan, "execute": workflow.step_execute, "confirm": workflow.step_confirm,
         "notify": notify.step_notify}
scenario = erasure_scenario()
request = verified_request(scenario)
step, ran = "plan", []
while step:
    result = steps[step](request_id=request.pk)
    steps[step](request_id=request.pk)  # every step twice: the second finds its work done
    ran.append(step)
    step = result.next_step
request.refresh_from_db()
receipt = SubjectNotice.objects.get(request=request).receipt
tombstone_ids = sorted(r["tombstone_id"] for r in receipt["receipts"])
records = {"free": [r.pk for r in scenario.free], "rule": scenario.under_rule.pk, "hold": scenario.under_hold.pk}
print(json.dumps({
    "ran": ran, "status": request.status, "records": records,
    "items": sorted([i.kind, i.object_id, i.decision, i.outcome, (i.reason or {}).get("code"),
                     i.deferred_until is not None]
                    for i in RequestItem.objects.filter(request=request)),
    "conflicts": sorted([c.record_id, c.code, c.authority]
                        for c in RetentionConflict.objects.filter(request=request)),
    "left": sorted(Record.objects.filter(pk__in=records["free"] + [records["rule"], records["hold"]])
                   .values_list("pk", flat=True)),
    "summary_left": DerivedArtifact.objects.filter(pk=scenario.summary_id).exists(),
    "notices": SubjectNotice.objects.filter(request=request).count(),
    "history": list(request.history.order_by("pk").values_list("action", flat=True)),
    # Every receipt the subject got verifies, and so does one built again (its proof read from the stored tree)
    "verified": [tombstone_verify(document=r).code for r in receipt["receipts"]],
    "rebuilt": [tombstone_verify(document=r).code
                for r in receipts_build(tombstone_ids=tombstone_ids, include_salts=False).values()],
}))
"""


def test_the_erasure_scenario_runs_to_partially_completed_on_sqlite(sqlite_migrated):
    found = manage_script(RUN, env=sqlite_env(sqlite_migrated, EMAIL_BACKEND=LOCMEM_MAIL))

    records = found["records"]
    assert found["ran"] == ["plan", "execute", "confirm", "notify"]
    assert found["status"] == "partially_completed"
    # Decided as the plan wrote them: erased where nothing forbids it, hidden with a deferral where a lock does.
    record_items = [item for item in found["items"] if item[0] == "record"]
    assert record_items == sorted(
        [["record", pk, "erase", "deleted", None, False] for pk in records["free"]]
        + [["record", records["rule"], "hide", "hidden", "retention_lock", True],
           ["record", records["hold"], "hide", "hidden", "legal_hold", False]])
    artifact_items = [item[2:4] for item in found["items"] if item[0] == "artifact"]
    assert artifact_items and {tuple(item) for item in artifact_items} == {("propagate", "deleted")}
    assert found["conflicts"] == sorted([[records["rule"], "retention_lock", "SEC 17a-4(f)"],
                                         [records["hold"], "legal_hold", "court order 26-cv-7"]])
    assert found["left"] == sorted([records["rule"], records["hold"]])
    assert found["summary_left"] is False
    assert found["notices"] == 1
    assert found["history"].count("plan") == found["history"].count("evaluate") == 1
    assert found["verified"] == found["rebuilt"] == ["genuine", "genuine"]


OVERRIDE = r"""
import json
from django.db import IntegrityError, transaction
from memory.models import Record
from retention.locks import lock_override
from retention.models import ContentClass
from tests.dsr.workflow_fixtures import erasure_scenario
from tests.factories import record, rule

scenario = erasure_scenario()
trades = ContentClass.objects.get(tenant=scenario.tenant, name="trade-ledger")
rule(scenario.tenant, trades, days=3000, mode="governance", authority="internal policy")
support = ContentClass.objects.create(tenant=scenario.tenant, name="support")
rule(scenario.tenant, support, days=400, mode="governance", authority="policy", protects="content")
ticket = record(scenario.tenant, support, content="a ticket")
refused = {}
for name, pk in (("compliance", scenario.under_rule.pk), ("hold", scenario.under_hold.pk), ("governance", ticket.pk)):
    try:
        with transaction.atomic():
            lock_override(record_id=pk)
    except IntegrityError as exc:
        refused[name] = str(exc).split(":")[0]
ticket.refresh_from_db()
print(json.dumps({"refused": refused, "ticket_lock": [ticket.retained_until, ticket.lock_protects_content]}))
"""


def test_legal_override_on_sqlite_ends_a_governance_lock_only(sqlite_migrated):
    found = manage_script(OVERRIDE, env=sqlite_env(sqlite_migrated, EMAIL_BACKEND=LOCMEM_MAIL))
    assert found == {"refused": {"compliance": "retention_lock", "hold": "legal_hold"}, "ticket_lock": [None, False]}
