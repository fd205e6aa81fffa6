"""The subject-request API: receive, read, verify or reject identity, extend. Bad input gets a 4xx with a
stable code and changes nothing; tenants cannot see or act on each other's requests."""
import json
import socket
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.core import mail

from dsr import deadlines
from dsr.models import ConflictStatus, RequestItem, RequestTransition, RetentionConflict, SubjectNotice, SubjectRequest
from dsr.services import request_create
from memory.models import Subject

FIVE_MB = "x" * (5 * 1024 * 1024)


@pytest.fixture
def operator(tenant, api_client_for):
    return api_client_for(tenant.name, "operator")


@pytest.fixture
def other_operator(other_tenant, api_client_for):
    return api_client_for(other_tenant.name, "operator")


def post(client, url, body):
    raw = body if isinstance(body, str) else json.dumps(body)
    return client.generic("POST", url, raw, content_type="application/json")


def snapshot():
    """Everything a bad request could have changed."""
    return (
        list(SubjectRequest.objects.order_by("pk").values_list(
            "pk", "status", "due_date", "extended_due_date", "extension_reason", "extension_notified_at",
            "identity_verified_by", "identity_method", "identity_verified_at", "closing_reason", "contact_email")),
        list(RequestTransition.objects.order_by("pk").values_list("pk", flat=True)),
        SubjectNotice.objects.count(), Subject.objects.count(), len(mail.outbox),
    )


def ago(**kw) -> datetime:
    return datetime.now(UTC) - timedelta(**kw)


def new(tenant, ref="s-1", **kw) -> SubjectRequest:
    fields = {"type": "erasure", "regulation": "gdpr", "channel": "email", "contact_email": "ann@example.org",
              "actor": "test", **kw}
    return request_create(tenant=tenant, subject_ref=ref, **fields)


@pytest.fixture
def world(tenant, other_tenant):
    return {"mine": new(tenant), "theirs": new(other_tenant, "s-9"),
            "late": new(tenant, "s-2", received_at=ago(days=40)),
            "mute": new(tenant, "s-3", contact_email="")}


# --- happy paths ---------------------------------------------------------------------------------------

def test_operator_receives_a_request_with_its_legal_due_date(operator, tenant):
    response = post(operator, "/api/v1/requests", {"subject": "s-42", "type": "erasure", "regulation": "gdpr",
                                                   "channel": "email", "received_at": "2026-01-31T10:00:00Z",
                                                   "contact_email": "ann@example.org"})

    assert response.status_code == 201, response.json()
    body = response.json()
    stored = SubjectRequest.objects.get(pk=body["id"])
    assert (stored.tenant, stored.subject.ref, stored.type, stored.regulation, stored.channel) == (
        tenant, "s-42", "erasure", "gdpr", "email")
    assert stored.status == "received" and stored.contact_email == "ann@example.org"
    # 31 January 2026 + one month = Saturday 28 February -> Monday 2 March.
    assert str(stored.due_date) == body["due_date"] == body["original_due_date"] == "2026-03-02"
    assert body["extension"] is None
    assert body["identity_verification"] == {"status": "pending", "verified_by": "", "method": "",
                                             "verified_at": None}
    assert body["progress"] == {"planned": 0, "done": 0, "refused": 0, "deferred": 0, "pending": 0}
    assert body["tombstone_ids"] == [] and body["open_conflicts"] == 0
    (row,) = RequestTransition.objects.filter(request=stored)
    assert (row.action, row.to_status) == ("received", "received")
    assert row.actor.startswith("token:") and row.actor.endswith(":operator")
    assert [h["action"] for h in body["history"]] == ["received"]


def test_received_at_defaults_to_now_and_other_regulation_to_30_days(operator):
    response = post(operator, "/api/v1/requests", {"subject": "s-1", "type": "access", "regulation": "other",
                                                   "channel": "web_form"})
    assert response.status_code == 201, response.json()
    stored = SubjectRequest.objects.get(pk=response.json()["id"])
    assert datetime.now(UTC) - stored.received_at < timedelta(minutes=1)
    assert stored.due_date == stored.received_at.date() + timedelta(days=30)


def test_get_shows_status_progress_tombstones_conflicts_and_history(operator, auditor_and_legal, world,
                                                                    django_assert_max_num_queries):
    request = world["mine"]
    tombstone = uuid.uuid4()
    RequestItem.objects.create(request=request, kind="record", object_id=1, outcome="deleted", tombstone_id=tombstone)
    RequestItem.objects.create(request=request, kind="record", object_id=2, outcome="hidden",
                               deferred_until=datetime.now(UTC) + timedelta(days=900), tombstone_id=tombstone)
    RequestItem.objects.create(request=request, kind="artifact", object_id=3, outcome="pending")
    RetentionConflict.objects.create(request=request, tenant=request.tenant, record_id=2, code="retention_lock",
                                     authority="SEC 17a-4", blocking={}, opened_at=datetime.now(UTC))
    RetentionConflict.objects.create(request=request, tenant=request.tenant, record_id=4, code="legal_hold",
                                     authority="court", blocking={}, opened_at=datetime.now(UTC),
                                     status=ConflictStatus.UPHELD)

    for client in (operator, *auditor_and_legal):
        with django_assert_max_num_queries(8):
            response = client.get(f"/api/v1/requests/{request.pk}")
        assert response.status_code == 200
        body = response.json()
        assert body["id"] == request.pk and body["status"] == "received" and body["subject"] == "s-1"
        assert body["progress"] == {"planned": 3, "done": 1, "refused": 1, "deferred": 1, "pending": 1}
        assert body["tombstone_ids"] == [str(tombstone)]
        assert body["open_conflicts"] == 1


@pytest.fixture
def auditor_and_legal(tenant, api_client_for):
    return api_client_for(tenant.name, "auditor"), api_client_for(tenant.name, "legal")


def test_verify_identity_records_who_how_and_when(operator, world):
    request = world["mine"]
    response = post(operator, f"/api/v1/requests/{request.pk}/verify-identity", {"method": "passport via video"})

    assert response.status_code == 200, response.json()
    request.refresh_from_db()
    assert request.status == "verified" and request.identity_method == "passport via video"
    assert request.identity_verified_by.endswith(":operator") and request.identity_verified_at is not None
    identity = response.json()["identity_verification"]
    assert identity["status"] == "verified" and identity["method"] == "passport via video"
    assert response.json()["history"][-1]["action"] == "verify_identity"


def test_rejected_identity_closes_the_request_with_the_reason(operator, world):
    request = world["mine"]
    response = post(operator, f"/api/v1/requests/{request.pk}/reject-identity", {"reason": "documents do not match"})

    assert response.status_code == 200, response.json()
    request.refresh_from_db()
    assert (request.status, request.closing_reason) == ("closed", "documents do not match")
    assert response.json()["identity_verification"]["status"] == "rejected"


def test_extension_tells_the_subject_and_moves_the_due_date(operator, world, mailoutbox):
    request = world["mine"]
    response = post(operator, f"/api/v1/requests/{request.pk}/extend", {"reason": "records in 14 systems"})

    assert response.status_code == 200, response.json()
    request.refresh_from_db()
    expected = deadlines.extended_due_date(regulation="gdpr", received_at=request.received_at)
    assert request.extended_due_date == expected == request.effective_due_date
    assert request.extension_reason == "records in 14 systems" and request.extension_notified_at is not None
    body = response.json()
    assert body["due_date"] == str(expected) and body["original_due_date"] == str(request.due_date)
    assert body["extension"]["reason"] == "records in 14 systems"
    (message,) = mailoutbox
    assert message.to == ["ann@example.org"]
    assert "records in 14 systems" in message.body and f"{expected:%d %B %Y}" in message.body
    notice = SubjectNotice.objects.get(request=request, kind="extension")
    assert (notice.to, notice.subject_line, notice.body) == ("ann@example.org", message.subject, message.body)
    assert RequestTransition.objects.filter(request=request, action="extend").count() == 1


def test_ccpa_extension_adds_45_days(operator, tenant, mailoutbox):
    request = new(tenant, "s-7", regulation="ccpa")
    assert post(operator, f"/api/v1/requests/{request.pk}/extend", {"reason": "volume"}).status_code == 200
    request.refresh_from_db()
    assert request.extended_due_date - request.due_date == timedelta(days=45)


def test_extension_is_not_recorded_when_the_notice_cannot_be_sent(operator, world, settings):
    # A real SMTP connection to a port where nothing listens: the mail server is down.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", port, 5
    before = snapshot()

    response = post(operator, f"/api/v1/requests/{world['mine'].pk}/extend", {"reason": "complex"})

    assert (response.status_code, response.json()["code"]) == (503, "notice_not_sent")
    assert snapshot() == before


# --- bad input -----------------------------------------------------------------------------------------

GOOD = {"subject": "s-5", "type": "erasure", "regulation": "gdpr", "channel": "email"}

CREATE_POSTS = [
    ({**GOOD, "subject": 5}, 400, "invalid"),
    ({**GOOD, "subject": ""}, 400, "invalid"),
    ({**GOOD, "subject": "x" * 201}, 400, "invalid"),
    ({**GOOD, "type": "deletion"}, 400, "invalid"),
    ({**GOOD, "type": ["erasure"]}, 400, "invalid"),
    ({**GOOD, "regulation": "lgpd"}, 400, "invalid"),
    ({**GOOD, "regulation": "GDPR"}, 400, "invalid"),
    ({**GOOD, "regulation": None}, 400, "invalid"),
    ({**GOOD, "channel": "pigeon"}, 400, "invalid"),
    ({**GOOD, "received_at": 1767225600}, 400, "invalid"),
    ({**GOOD, "received_at": "2026-01-31T10:00:00"}, 400, "invalid"),  # no UTC offset
    ({**GOOD, "received_at": "31/01/2026"}, 400, "invalid"),
    ({**GOOD, "received_at": "2026-02-30T10:00:00Z"}, 400, "invalid"),
    ({**GOOD, "received_at": "2999-01-01T00:00:00Z"}, 400, "invalid_received_at"),
    ({**GOOD, "contact_email": "not an address"}, 400, "invalid"),
    ({**GOOD, "contact_email": 7}, 400, "invalid"),
    ({**GOOD, "tenant": "globex"}, 400, "invalid"),
    ({**GOOD, "due_date": "2030-01-01"}, 400, "invalid"),
    ({**GOOD, "status": "completed"}, 400, "invalid"),
    ({"subject": "s-5", "type": "erasure", "regulation": "gdpr"}, 400, "invalid"),
    ([GOOD], 400, "invalid"),
    ("{not json", 400, "malformed_json"),
]


@pytest.mark.parametrize("body,status,code", CREATE_POSTS)
def test_bad_create_gets_a_stable_4xx_and_changes_nothing(operator, world, body, status, code):
    before = snapshot()
    response = post(operator, "/api/v1/requests", body)
    assert (response.status_code, response.json()["code"]) == (status, code), response.json()
    assert response.json()["detail"]
    assert snapshot() == before


ACTION_POSTS = [
    ("mine", "verify-identity", {}, 400, "invalid"),
    ("mine", "verify-identity", {"method": 1}, 400, "invalid"),
    ("mine", "verify-identity", {"method": "  "}, 400, "invalid"),
    ("mine", "verify-identity", {"method": "x" * 201}, 400, "invalid"),
    ("mine", "verify-identity", {"method": "id", "by": "me"}, 400, "invalid"),
    ("mine", "reject-identity", {"reason": ["no"]}, 400, "invalid"),
    ("mine", "reject-identity", {}, 400, "invalid"),
    ("mine", "extend", {"reason": ""}, 400, "invalid"),
    ("mine", "extend", {"reason": None}, 400, "invalid"),
    ("mine", "extend", {"reason": "x", "days": 90}, 400, "invalid"),
    ("mine", "extend", "[1]", 400, "invalid"),
    ("late", "extend", {"reason": "too late"}, 409, "extension_too_late"),
    ("mute", "extend", {"reason": "nobody to tell"}, 409, "no_contact_email"),
    ("theirs", "verify-identity", {"method": "passport"}, 404, "not_found"),
    ("theirs", "reject-identity", {"reason": "x"}, 404, "not_found"),
    ("theirs", "extend", {"reason": "x"}, 404, "not_found"),
    ("theirs", "extend", {}, 404, "not_found"),
    (999999999, "verify-identity", {"method": "passport"}, 404, "not_found"),
    (10**30, "extend", {"reason": "x"}, 404, "not_found"),
    (0, "reject-identity", {"reason": "x"}, 404, "not_found"),
]


@pytest.mark.parametrize("which,action,body,status,code", ACTION_POSTS)
def test_bad_action_gets_a_stable_4xx_and_changes_nothing(operator, world, which, action, body, status, code):
    request_id = world[which].pk if isinstance(which, str) else which
    before = snapshot()
    response = post(operator, f"/api/v1/requests/{request_id}/{action}", body)
    assert (response.status_code, response.json()["code"]) == (status, code), response.json()
    assert response.json()["detail"]
    assert snapshot() == before


def test_extension_twice_is_409_and_changes_nothing(operator, world, mailoutbox):
    url = f"/api/v1/requests/{world['mine'].pk}/extend"
    assert post(operator, url, {"reason": "complex"}).status_code == 200
    before = snapshot()

    response = post(operator, url, {"reason": "even more complex"})

    assert (response.status_code, response.json()["code"]) == (409, "already_extended")
    assert snapshot() == before and len(mailoutbox) == 1


def test_verify_twice_or_after_rejection_is_409_and_changes_nothing(operator, world):
    mine = world["mine"]
    assert post(operator, f"/api/v1/requests/{mine.pk}/verify-identity", {"method": "passport"}).status_code == 200
    before = snapshot()
    for action, body in (("verify-identity", {"method": "again"}), ("reject-identity", {"reason": "no"})):
        response = post(operator, f"/api/v1/requests/{mine.pk}/{action}", body)
        assert (response.status_code, response.json()["code"]) == (409, "illegal_transition")
    assert snapshot() == before


@pytest.mark.parametrize("url", ["/api/v1/requests", "/api/v1/requests/{id}/verify-identity",
                                 "/api/v1/requests/{id}/reject-identity", "/api/v1/requests/{id}/extend"])
def test_five_megabyte_body_is_refused_with_413(operator, world, url):
    before = snapshot()
    response = post(operator, url.format(id=world["mine"].pk), {**GOOD, "reason": FIVE_MB, "method": FIVE_MB})
    assert (response.status_code, response.json()["code"]) == (413, "payload_too_large")
    assert snapshot() == before


def test_another_tenants_request_is_not_found(operator, other_operator, world):
    before = snapshot()
    response = operator.get(f"/api/v1/requests/{world['theirs'].pk}")
    assert (response.status_code, response.json()["code"]) == (404, "not_found")
    assert other_operator.get(f"/api/v1/requests/{world['mine'].pk}").status_code == 404
    assert other_operator.get(f"/api/v1/requests/{world['theirs'].pk}").status_code == 200
    assert snapshot() == before


@pytest.mark.parametrize("url", ["/api/v1/requests/999999999", "/api/v1/requests/99999999999999999999999"])
def test_unknown_request_is_not_found(operator, url):
    response = operator.get(url)
    assert (response.status_code, response.json()["code"]) == (404, "not_found")


def test_only_operators_act_and_agents_cannot_read(agent, auditor_and_legal, client, world):
    before = snapshot()
    mine = world["mine"]
    for who in (agent, *auditor_and_legal):
        response = post(who, "/api/v1/requests", GOOD)
        assert (response.status_code, response.json()["code"]) == (403, "permission_denied")
        response = post(who, f"/api/v1/requests/{mine.pk}/extend", {"reason": "x"})
        assert (response.status_code, response.json()["code"]) == (403, "permission_denied")
    assert agent.get(f"/api/v1/requests/{mine.pk}").status_code == 403
    assert client.get(f"/api/v1/requests/{mine.pk}").json()["code"] == "not_authenticated"
    assert snapshot() == before


def test_start_runs_only_after_verification_and_enqueues_after_commit(db, api_client_for, django_capture_on_commit_callbacks):
    operator = api_client_for("acme", "operator")
    created = operator.post("/api/v1/requests", {"subject": "s-start", "type": "access", "regulation": "gdpr",
                                                 "channel": "email"}, format="json").json()
    refused = operator.post(f"/api/v1/requests/{created['id']}/start", format="json")
    assert (refused.status_code, refused.json()["code"]) == (409, "not_verified")
    operator.post(f"/api/v1/requests/{created['id']}/verify-identity", {"method": "passport"}, format="json")

    with django_capture_on_commit_callbacks() as enqueued:
        started = operator.post(f"/api/v1/requests/{created['id']}/start", format="json")

    assert started.status_code == 200 and len(enqueued) == 1
    assert started.json()["history"][-1]["action"] == "workflow_started"
    missing = operator.get(f"/api/v1/requests/{created['id']}/export")
    assert (missing.status_code, missing.json()["code"]) == (404, "no_export")
    bad = operator.post(f"/api/v1/requests/{created['id']}/start", {"now": True}, format="json")
    assert bad.status_code == 400
