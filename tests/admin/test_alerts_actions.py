"""The alerts' admin action (alerts.admin.AlertAdmin.acknowledge), registered with @covers like every action:
an operator acknowledges, an auditor is not offered it, an alert already resolved is left as it is."""
from __future__ import annotations

import pytest

from alerts.models import Alert, AlertKind
from alerts.services import alert_raise, alert_resolve
from tests.admin.actions import act, covers, offered, said
from tests.admin.conftest import staff_user

pytestmark = pytest.mark.django_db


@covers(("alerts.Alert", "acknowledge"))
def test_acknowledge_leaves_resolved_alerts_alone_and_is_an_operators(client_as):
    kept = alert_raise(kind=AlertKind.SWEEP_FAILED, cause="compaction", title="The compaction sweep failed")
    gone = alert_raise(kind=AlertKind.SWEEP_FAILED, cause="pact_expiry", title="The pact sweep failed")
    alert_resolve(kind=AlertKind.SWEEP_FAILED, cause="pact_expiry")

    response = act(client_as("operator"), Alert, "acknowledge", [kept.alert_id, gone.alert_id])

    assert said(response) == ["1 alert acknowledged."]
    assert Alert.objects.get(pk=kept.alert_id).acknowledged_by == "admin:operator-ann"
    assert Alert.objects.get(pk=gone.alert_id).acknowledged_at is None
    assert "acknowledge" not in offered(Alert, staff_user("auditor"))
    assert "acknowledge" not in offered(Alert, staff_user("legal"))
