"""A DRP request through its subject request's life: each dsr state as the agent sees it (DRP 0.9.4 section
3.02), driven by dsr's own services and workflow steps as tests/dsr does."""
import pytest

from drp.models import DataRightsRequest
from drp.selectors import status_of
from dsr import services as dsr
from dsr.models import RequestStatus
from dsr.services import workflow
from tests.drp.conftest import assert_valid
from tests.dsr.test_workflow_steps import run_to_end
from tests.dsr.workflow_fixtures import erasure_scenario
from tests.factories import record

pytestmark = pytest.mark.django_db


def subject_request(status):
    return DataRightsRequest.objects.get(request_id=status["request_id"]).subject_request


def test_deletion_is_in_progress_until_the_workflow_completes_then_fulfilled(drp, tenant, chat, mailoutbox):
    kept = record(tenant, chat, content="my cat is called Falcon", subject="cust-1001")
    status = drp.create()
    sr = subject_request(status)
    assert drp.status(status["request_id"])["processing_details"].startswith("Received; the business is verifying")

    dsr.request_verify_identity(request=sr, actor="token:op:operator", method="DRP agent attestation: email verified")
    assert drp.status(status["request_id"])["processing_details"].startswith("Identity verified")
    workflow.workflow_start(request=sr, actor="token:op:operator")
    run_to_end(sr.pk)

    sr.refresh_from_db()
    assert sr.status == RequestStatus.COMPLETED and not type(kept).objects.filter(pk=kept.pk).exists()
    done = drp.status(status["request_id"])
    assert done["status"] == "fulfilled" and "reason" not in done and "expected_by" not in done
    dsr.request_close(request=sr, actor="token:op:operator")
    assert drp.status(status["request_id"])["status"] == "fulfilled"


def test_erasure_kept_in_part_by_a_lock_stays_in_progress_with_details(drp, mailoutbox):
    erasure_scenario(tenant_name="acme", subject="subject-7")
    status = drp.create(subject_ref="subject-7")
    sr = subject_request(status)
    dsr.request_verify_identity(request=sr, actor="op", method="DRP agent attestation")
    workflow.workflow_start(request=sr, actor="op")

    run_to_end(sr.pk)

    sr.refresh_from_db()
    assert sr.status == RequestStatus.PARTIALLY_COMPLETED
    now = drp.status(status["request_id"])
    assert now["status"] == "in_progress" and "retention obligation" in now["processing_details"]
    # closed there, it is done as far as the law allows: fulfilled, saying what is kept
    dsr.request_close(request=sr, actor="op", reason="Trade records are kept 7 years (SEC 17a-4).")
    done = drp.status(status["request_id"])
    assert done["status"] == "fulfilled" and "SEC 17a-4" in done["processing_details"]


def test_extension_moves_expected_by_and_says_why(drp, mailoutbox):
    status = drp.create()
    sr = subject_request(status)

    dsr.request_extend(request=sr, actor="op", reason="Your data is spread over many systems.")

    sr.refresh_from_db()
    now = drp.status(status["request_id"])
    assert now["expected_by"] == f"{sr.extended_due_date.isoformat()}T23:59:59Z" != status["expected_by"]
    assert "Your data is spread over many systems." in now["processing_details"]


def test_rejected_identity_is_denied_insuf_verification(drp):
    status = drp.create()
    dsr.request_reject_identity(request=subject_request(status), actor="op", reason="The e-mail matches no account.")
    now = drp.status(status["request_id"])
    assert (now["status"], now["reason"]) == ("denied", "insuf_verification")
    assert now["processing_details"] == "The e-mail matches no account."


def test_refused_request_is_denied_other_with_the_reason(drp):
    status = drp.create()
    sr = dsr.request_refuse(request=subject_request(status), actor="op", reason="Manifestly excessive.")
    for _ in range(2):
        now = drp.status(status["request_id"])
        assert (now["status"], now["reason"], now["processing_details"]) == ("denied", "other", "Manifestly excessive.")
        sr = dsr.request_close(request=sr, actor="op") if sr.status != "closed" else sr


def test_request_being_carried_out_cannot_be_revoked(drp, mailoutbox):
    status = drp.create()
    sr = subject_request(status)
    dsr.request_verify_identity(request=sr, actor="op", method="m")
    workflow.workflow_start(request=sr, actor="op")
    run_to_end(sr.pk)

    response = drp.revoke(status["request_id"])

    assert response.status_code == 409 and response.json()["error"] == "not_revocable"
    assert drp.status(status["request_id"])["status"] == "fulfilled"


# The mapping table (drp/selectors.py): every state a subject request can be in has a DRP status.
MAPPING = [
    ("received", "in_progress", None),
    ("verified", "in_progress", None),
    ("planned", "in_progress", None),
    ("executing", "in_progress", None),
    ("awaiting_legal", "in_progress", None),
    ("partially_completed", "in_progress", None),
    ("completed", "fulfilled", None),
    ("refused", "denied", "other"),
    ("closed", "denied", "other"),
]


def test_mapping_table_covers_every_subject_request_state():
    assert {state for state, _, _ in MAPPING} == set(RequestStatus.values)


@pytest.mark.parametrize(("state", "drp_status", "reason"), MAPPING)
def test_mapping_of_each_subject_request_state(drp, state, drp_status, reason):
    status = drp.create()
    type(subject_request(status)).objects.filter(drp__request_id=status["request_id"]).update(
        status=state, closing_reason="why" if state in ("refused", "closed") else "")

    shown = status_of(DataRightsRequest.objects.select_related("subject_request").get(request_id=status["request_id"]))

    assert_valid(shown, "exercise-status")
    assert (shown["status"], shown.get("reason")) == (drp_status, reason)
