"""Alerts as a service: once per cause however often it happens, one mail per alert (not per repeat), resolved
when its cause is, a new alert when the cause comes back after that; acknowledged from the admin."""
from __future__ import annotations

import pytest
from django.conf import settings
from django.db import transaction

from alerts.errors import AlertsError
from alerts.models import Alert, AlertKind
from alerts.services import alert_raise, alert_resolve, alerts_acknowledge, alerts_resolve_except

pytestmark = pytest.mark.django_db


def raise_sweep(**kwargs):
    return alert_raise(kind=AlertKind.SWEEP_FAILED, cause="compaction", title="The compaction sweep failed", **kwargs)


def test_a_cause_that_repeats_makes_one_alert_and_one_mail(operators, mailoutbox, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        first = raise_sweep()
    with django_capture_on_commit_callbacks(execute=True):
        again = [raise_sweep(detail=f"try {i}") for i in range(3)]

    assert first.created and not any(r.created for r in again)
    alert = Alert.objects.get()
    assert alert.occurrences == 4 and alert.detail == "try 2" and alert.last_seen_at >= alert.first_seen_at
    assert len(mailoutbox) == 1
    mail = mailoutbox[0]
    assert sorted(mail.to) == ["ann@example.org", "bob@example.org"]  # operators with an address; not legal
    assert "The compaction sweep failed" in mail.subject and "one mail per alert" in mail.body
    assert alert.mailed_at is not None


def test_the_mail_links_to_the_cause_where_the_service_is_reached(operators, mailoutbox,
                                                                  django_capture_on_commit_callbacks):
    # By default the admin is where the public pages are, so that serve_embedded's port holds for both
    with django_capture_on_commit_callbacks(execute=True):
        raise_sweep(link="/admin/memory/sweeprun/7/change/")

    assert settings.LEDGER_ALERT_ADMIN_URL == settings.LEDGER_PUBLIC_URL
    assert f"{settings.LEDGER_PUBLIC_URL.rstrip('/')}/admin/memory/sweeprun/7/change/" in mailoutbox[0].body


def test_the_same_cause_in_two_tenants_is_two_alerts(tenant, other_tenant):
    kwargs = {"kind": AlertKind.DEADLINE_NEAR, "cause": "request:1", "title": "t"}
    assert alert_raise(tenant_id=tenant.pk, **kwargs).created
    assert alert_raise(tenant_id=other_tenant.pk, **kwargs).created
    assert alert_raise(tenant_id=None, **kwargs).created
    assert not alert_raise(tenant_id=None, **kwargs).created
    assert Alert.objects.count() == 3


def test_an_alert_raised_in_a_transaction_that_rolls_back_was_never_raised(operators, mailoutbox,
                                                                           django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        with pytest.raises(RuntimeError), transaction.atomic():
            raise_sweep()
            raise RuntimeError("the producer's transaction failed")
    assert not Alert.objects.exists() and mailoutbox == []


def test_resolved_when_the_cause_is_and_a_new_alert_if_it_comes_back(operators, mailoutbox,
                                                                     django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        first = raise_sweep()
    assert alert_resolve(kind=AlertKind.SWEEP_FAILED, cause="compaction", resolution="run 7 finished") == 1
    assert alert_resolve(kind=AlertKind.SWEEP_FAILED, cause="compaction") == 0  # nothing open: nothing written
    resolved = Alert.objects.get(pk=first.alert_id)
    assert resolved.resolved_at is not None and resolved.resolution == "run 7 finished"

    with django_capture_on_commit_callbacks(execute=True):
        second = raise_sweep()
    assert second.created and second.alert_id != first.alert_id
    assert len(mailoutbox) == 2  # a new alert, a new mail


def test_resolve_except_closes_only_the_causes_no_longer_found(tenant):
    for cause in ("class:1", "class:2"):
        alert_raise(kind=AlertKind.COVERAGE_GAP, cause=cause, tenant_id=tenant.pk, title=cause)
    closed = alerts_resolve_except(kind=AlertKind.COVERAGE_GAP, keep={(tenant.pk, "class:2")}, resolution="clean")
    assert closed == 1
    assert set(Alert.objects.filter(resolved_at__isnull=True).values_list("cause", flat=True)) == {"class:2"}


def test_an_acknowledged_alert_leaves_the_banner_and_a_repeat_does_not_mail_again(operators, mailoutbox,
                                                                                  django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        raised = raise_sweep()
    assert alerts_acknowledge(alert_ids=[raised.alert_id], actor="admin:op-ann") == 1
    assert alerts_acknowledge(alert_ids=[raised.alert_id], actor="admin:op-ann") == 0
    with django_capture_on_commit_callbacks(execute=True):
        again = raise_sweep()
    alert = Alert.objects.get()
    assert not again.created and alert.acknowledged_by == "admin:op-ann" and alert.occurrences == 2
    assert len(mailoutbox) == 1


@pytest.mark.parametrize("kwargs, code", [
    ({"kind": "bogus", "cause": "x"}, "invalid_alert_kind"),
    ({"kind": AlertKind.SWEEP_FAILED, "cause": ""}, "invalid_alert_cause"),
    ({"kind": AlertKind.SWEEP_FAILED, "cause": "x" * 201}, "invalid_alert_cause"),
    ({"kind": AlertKind.SWEEP_FAILED, "cause": 7}, "invalid_alert_cause"),
    ({"kind": AlertKind.SWEEP_FAILED, "cause": "x", "level": "panic"}, "invalid_alert_level"),
])
def test_bad_input_is_refused_with_a_code_and_changes_nothing(kwargs, code):
    with pytest.raises(AlertsError) as refused:
        alert_raise(title="t", **kwargs)
    assert refused.value.code == code and not Alert.objects.exists()


def test_no_operator_with_an_address_means_no_mail_and_no_crash(mailoutbox, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        raise_sweep()
    assert mailoutbox == [] and Alert.objects.get().mailed_at is None
