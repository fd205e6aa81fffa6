"""Deferred erasures (dsr.services.deferred): a record an erasure request had to keep is erased when its
lock ends, through the one guarded forget, with a follow-up tombstone that closes the first one's deferred
item, the item and conflict updated, the subject told, the history written."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from dsr.models import (
    ConflictStatus,
    ItemDecision,
    ItemOutcome,
    RequestItem,
    RequestStatus,
    RetentionConflict,
    SubjectNotice,
)
from dsr.services.conflicts import conflict_defer, conflict_uphold
from dsr.services.deferred import deferred_erasures_batch
from memory.models import ForgetEvent, Record
from memory.sweeps import sweep_run_sync
from retention.models import LegalHold, RetentionRule
from retention.services import hold_release, rule_change_duration
from tests.dsr.test_workflow_steps import run_to_end
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request
from tests.factories import ContentClassFactory, record, rule
from tombstones.models import Tombstone
from tombstones.verification import deferred_items

pytestmark = pytest.mark.django_db


@pytest.fixture
def kept(mailoutbox):
    """The issue's erasure scenario run to its end: two records kept (a compliance rule, a hold)."""
    scenario = erasure_scenario()
    request = verified_request(scenario)
    run_to_end(request.pk)
    request.refresh_from_db()
    assert request.status == RequestStatus.PARTIALLY_COMPLETED
    mailoutbox.clear()
    return scenario, request


def item_of(request, record_id) -> RequestItem:
    return RequestItem.objects.get(request=request, kind="record", object_id=record_id)


def test_a_record_kept_under_a_hold_is_erased_when_the_hold_is_released(kept, mailoutbox,
                                                                        django_capture_on_commit_callbacks):
    scenario, request = kept
    first = item_of(request, scenario.under_hold.pk)
    assert first.decision == ItemDecision.HIDE and first.outcome == ItemOutcome.HIDDEN
    hold_release(hold=LegalHold.objects.get(), actor="legal", reason="settled")

    with django_capture_on_commit_callbacks(execute=True):  # the notice goes after the batch commits
        run = sweep_run_sync(kind="deferred_erasures", actor="test")

    assert not Record.objects.filter(pk=scenario.under_hold.pk).exists()
    item = item_of(request, scenario.under_hold.pk)
    assert item.outcome == ItemOutcome.DELETED and item.decision == ItemDecision.HIDE
    assert item.forget_event_id != first.forget_event_id and str(item.tombstone_id) != str(first.tombstone_id)
    statement = json.loads(bytes(Tombstone.objects.get(id=item.tombstone_id).payload))
    assert statement["request"]["authority"] == "GDPR Art. 17"
    assert statement["propagation"]["closes"] == [{"tombstone_id": str(first.tombstone_id),
                                                   "handle": str(first.forget_event_id), "action": "erase",
                                                   "items": [f"record:{scenario.under_hold.pk}"]}]
    first_statement = json.loads(bytes(Tombstone.objects.get(id=first.tombstone_id).payload))
    assert f"record:{scenario.under_hold.pk}" in deferred_items(first_statement)
    conflict = RetentionConflict.objects.get(request=request, record_id=scenario.under_hold.pk)
    assert conflict.status == ConflictStatus.LAPSED and conflict.decided_by == "sweep:deferred_erasures"
    assert request.history.filter(action="deferred_erasure").count() == 1
    notice = SubjectNotice.objects.get(request=request, kind__startswith="deferred-")
    assert notice.sent_at is not None and notice.receipt["receipts"][0]["tombstone_id"] == str(item.tombstone_id)
    (mail,) = mailoutbox
    assert mail.to == ["subject@example.org"] and "now erased" in mail.body and str(item.tombstone_id) in mail.body
    assert mail.attachments
    # The record under the compliance rule still waits, on record.
    assert Record.objects.get(pk=scenario.under_rule.pk).content == "bought 100 ACME"
    assert run.counts["deleted"] == 1 and run.report["waiting"] == 1


def test_an_upheld_conflict_is_erased_when_its_lock_ends(mailoutbox):
    scenario = erasure_scenario()
    invoices = ContentClassFactory(tenant=scenario.tenant, name="invoices")
    invoice_rule = rule(scenario.tenant, invoices, days=90, authority="Tax code §147", protects="content")
    invoice = record(scenario.tenant, invoices, scope="user:7/session:4", content="invoice 12", subject="subject-7",
                     age_days=20)
    request = verified_request(scenario)
    run_to_end(request.pk)
    conflict = RetentionConflict.objects.get(request=request, record_id=invoice.pk)
    conflict_uphold(conflict=conflict, actor="legal", justification="the tax code requires it")
    deferred_erasures_batch()
    assert Record.objects.filter(pk=invoice.pk).exists()  # still locked

    rule_change_duration(rule=RetentionRule.objects.get(pk=invoice_rule.pk), duration_days=10, actor="legal",
                         justification="the tax office shortened the period")
    result = deferred_erasures_batch()

    assert result.counts["deleted"] == 1 and not Record.objects.filter(pk=invoice.pk).exists()
    assert item_of(request, invoice.pk).outcome == ItemOutcome.DELETED
    assert RetentionConflict.objects.get(pk=conflict.pk).status == ConflictStatus.UPHELD  # legal's decision stands


def test_a_conflict_legal_deferred_to_a_later_date_waits_for_it(kept):
    scenario, request = kept
    conflict = RetentionConflict.objects.get(request=request, record_id=scenario.under_hold.pk)
    conflict_defer(conflict=conflict, actor="legal", justification="ask the court first",
                   until=timezone.now().date() + timedelta(days=10))
    hold_release(hold=LegalHold.objects.get(), actor="legal", reason="settled")

    result = deferred_erasures_batch()

    assert result.counts["claimed"] == 0 and Record.objects.filter(pk=scenario.under_hold.pk).exists()
    assert RetentionConflict.objects.get(pk=conflict.pk).status == ConflictStatus.DEFERRED


def test_a_record_gone_by_another_path_closes_its_item_without_a_forget(kept):
    scenario, request = kept
    hold_release(hold=LegalHold.objects.get(), actor="legal", reason="settled")
    sweep_run_sync(kind="compaction", actor="test")  # leaves it: the request keeps it
    assert Record.objects.filter(pk=scenario.under_hold.pk).exists()
    Record.objects.filter(pk=scenario.under_hold.pk).delete()  # another guarded path got there first
    events = ForgetEvent.objects.count()

    result = deferred_erasures_batch()

    assert result.counts["gone"] == 1 and ForgetEvent.objects.count() == events
    assert item_of(request, scenario.under_hold.pk).outcome == ItemOutcome.GONE


def test_a_notice_a_crash_kept_from_sending_is_sent_by_the_next_batch(kept, mailoutbox,
                                                                      django_capture_on_commit_callbacks):
    scenario, request = kept
    hold_release(hold=LegalHold.objects.get(), actor="legal", reason="settled")
    with django_capture_on_commit_callbacks(execute=False):  # the worker died right after the commit
        deferred_erasures_batch()
    assert SubjectNotice.objects.get(request=request, kind__startswith="deferred-").sent_at is None
    assert not mailoutbox

    result = deferred_erasures_batch()

    assert result.counts["notices_delivered_late"] == 1 and len(mailoutbox) == 1
    assert SubjectNotice.objects.get(request=request, kind__startswith="deferred-").sent_at is not None


def test_restricted_records_are_kept_by_every_sweep(mailoutbox):
    scenario = erasure_scenario()
    request = verified_request(scenario, type="restriction")
    run_to_end(request.pk)
    hidden = list(RequestItem.objects.filter(request=request, kind="record", outcome=ItemOutcome.HIDDEN)
                  .values_list("object_id", flat=True))
    assert hidden
    hold_release(hold=LegalHold.objects.get(), actor="legal", reason="settled")

    for kind in ("compaction", "deferred_erasures", "pact_expiry"):
        sweep_run_sync(kind=kind, actor="test")

    assert Record.objects.filter(pk__in=hidden).exclude(content="").count() == len(hidden)
