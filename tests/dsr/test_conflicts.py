"""Legal's three decisions on a retention conflict; an override of a compliance lock or an active hold
is refused whoever asks."""
from datetime import timedelta

import pytest
from django.utils import timezone

from config.errors import ApplicationError
from dsr.models import ConflictStatus, RequestStatus, RetentionConflict
from dsr.services.conflicts import conflict_defer, conflict_override, conflict_uphold
from memory.models import Record
from retention.models import LegalHold
from retention.services import hold_release
from tests.dsr.test_workflow_steps import STEPS, run_to_end
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request

pytestmark = pytest.mark.django_db


@pytest.fixture
def decided_request(mailoutbox):
    scenario = erasure_scenario()
    request = verified_request(scenario)
    run_to_end(request.pk)
    conflicts = {c.code: c for c in RetentionConflict.objects.filter(request=request)}
    return scenario, request, conflicts


def test_override_of_a_compliance_lock_is_refused_for_anyone(decided_request):
    scenario, request, conflicts = decided_request
    for actor in ("legal:alice", "superuser:root"):
        with pytest.raises(ApplicationError) as refused:
            conflict_override(conflict=conflicts["retention_lock"], actor=actor, justification="business need")
        assert refused.value.code == "compliance_lock"
    assert Record.objects.get(pk=scenario.under_rule.pk).content == "bought 100 ACME"
    assert RetentionConflict.objects.get(pk=conflicts["retention_lock"].pk).status == ConflictStatus.OPEN


def test_override_under_an_active_hold_is_refused_until_the_hold_is_released(decided_request, django_capture_on_commit_callbacks):
    scenario, request, conflicts = decided_request
    with pytest.raises(ApplicationError) as refused:
        conflict_override(conflict=conflicts["legal_hold"], actor="legal:alice", justification="settled")
    assert refused.value.code == "legal_hold"
    assert Record.objects.filter(pk=scenario.under_hold.pk).exists()

    hold_release(hold=LegalHold.objects.get(), actor="legal:alice", reason="case settled")
    with django_capture_on_commit_callbacks() as enqueued:
        conflict_override(conflict=conflicts["legal_hold"], actor="legal:alice", justification="case settled")

    assert not Record.objects.filter(pk=scenario.under_hold.pk).exists()
    assert len(enqueued) == 1  # the workflow continues by itself
    request.refresh_from_db()
    assert request.status == RequestStatus.EXECUTING
    step = "execute"
    while step:  # what the worker would run
        step = STEPS[step](request_id=request.pk).next_step
    request.refresh_from_db()
    assert request.status == RequestStatus.PARTIALLY_COMPLETED  # the compliance-locked record is still kept
    assert request.notices.filter(kind="outcome-2").exists()
    assert request.history.filter(action="conflict_overridden", actor="legal:alice").exists()


def test_uphold_keeps_the_record_hidden_and_tells_the_subject(decided_request, mailoutbox):
    scenario, request, conflicts = decided_request
    conflict_uphold(conflict=conflicts["retention_lock"], actor="legal:bob", justification="SEC requires it")

    kept = Record.objects.get(pk=scenario.under_rule.pk)
    assert kept.forgotten_at is not None and kept.content
    assert "supervisory authority" in mailoutbox[-1].body and "SEC requires it" in mailoutbox[-1].body
    conflict = RetentionConflict.objects.get(pk=conflicts["retention_lock"].pk)
    assert (conflict.status, conflict.decided_by) == (ConflictStatus.UPHELD, "legal:bob")
    with pytest.raises(ApplicationError) as again:
        conflict_override(conflict=conflict, actor="legal:bob", justification="changed my mind")
    assert again.value.code == "conflict_decided"


def test_defer_needs_a_future_date_and_a_reason(decided_request):
    _, _, conflicts = decided_request
    with pytest.raises(ApplicationError):
        conflict_defer(conflict=conflicts["legal_hold"], actor="legal", justification="later",
                       until=timezone.now().date())
    with pytest.raises(ApplicationError):
        conflict_defer(conflict=conflicts["legal_hold"], actor="legal", justification=" ",
                       until=timezone.now().date() + timedelta(days=30))
    deferred = conflict_defer(conflict=conflicts["legal_hold"], actor="legal", justification="await ruling",
                              until=timezone.now().date() + timedelta(days=30))
    assert deferred.status == ConflictStatus.DEFERRED and deferred.deferred_to
