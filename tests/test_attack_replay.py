"""Issue 19's attack list, replayed on a fresh database as the application role (a real non-owner PostgreSQL
role with the service's grants, `manage.py db_grant_app_role`), never a superuser.

The estate is built through the service, as that role: compliance, write-once and masked classes, records
of a subject written in NFD, a hold placed on the NFC spelling. Then every attack of the issue is tried:
through the API, the services, the ORM, the admin changelist, and raw SQL on the role's own connection.
Each attempt is recorded; the test ends by comparing every protected record with what it was (0 destroyed
or altered), by asking the coverage audit (0 gaps), and by reading the public tombstones (nothing personal).
"""
from __future__ import annotations

import base64
import json
import threading
import unicodedata
from datetime import date, timedelta

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import connection, connections, transaction
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from dsr.models import RequestStatus, RetentionConflict, SubjectRequest
from dsr.services.conflicts import conflict_override
from memory.models import Record
from memory.services.tokens import token_issue
from retention.audit import coverage_audit
from retention.models import LegalHold, RetentionRule
from retention.services import rule_create
from tests.conftest import APP_ROLE
from tests.dsr.test_workflow_steps import run_to_end
from tombstones.models import Tombstone, TombstoneSalts

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="the roles and the guard are PostgreSQL's")

NFC = unicodedata.normalize("NFC", "José Müller")
NFD = unicodedata.normalize("NFD", "José Müller")
RACERS, PER_RACER = 8, 4


def _client(role: str) -> tuple[APIClient, str]:
    _, key = token_issue(tenant_name="acme", role=role)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client, key


def _post(client, url, body):
    raw = body if isinstance(body, str) else json.dumps(body)
    return client.generic("POST", url, raw, content_type="application/json")


class Replay:
    """The attempts made and what became of each: `refused` (an error, a 4xx, a refusal) or `answered` (the
    service did what it may: hid a record, redacted under an existence-only lock...)."""

    def __init__(self):
        self.attempts: list[tuple[str, str]] = []

    def attempt(self, name: str, attack) -> None:
        try:
            with transaction.atomic():
                outcome = attack()
        except Exception as exc:  # noqa: BLE001 (every refusal counts, whatever its form)
            self.attempts.append((name, f"refused: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"))
            return
        self.attempts.append((name, f"answered: {outcome}"))

    def raw(self, connect, name: str, *statements: tuple[str, list]) -> None:
        """Statements in one transaction on the application role's own connection, as psql would send them."""
        with connect() as conn:
            conn.autocommit = False
            try:
                for sql, params in statements:
                    conn.execute(sql, params)
                conn.commit()
                self.attempts.append((name, "answered: committed"))
            except psycopg.Error as exc:
                conn.rollback()
                self.attempts.append((name, f"refused: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"))


@pytest.fixture
def estate(as_app_role, app_role, mailoutbox):
    agent, agent_key = _client("agent")
    legal, _ = _client("legal")
    for name in ("trades", "ledger", "kyc", "chat", "fresh"):
        assert _post(legal, "/api/v1/retention/classes", {"name": name}).status_code == 201
    for body in (
        {"content_class": "trades", "kind": "regulatory", "duration_days": 2555, "authority": "SEC 17a-4",
         "mode": "compliance", "protects": "existence"},
        {"content_class": "ledger", "kind": "regulatory", "duration_days": 2555, "authority": "SEC 17a-4(f)",
         "mode": "compliance", "protects": "content"},
        {"content_class": "kyc", "kind": "regulatory", "duration_days": 2555, "authority": "AMLD5 Art. 40",
         "mode": "compliance", "protects": "content"},
        {"content_class": "kyc", "kind": "operational", "duration_days": 3000, "authority": "internal policy 4.2",
         "mode": "governance", "protects": "content"},
    ):
        assert _post(legal, "/api/v1/retention/rules", body).status_code == 201, body
    ids = {}
    for cls, n in (("trades", 3), ("ledger", 3), ("kyc", 2)):
        for i in range(n):
            answer = _post(agent, "/api/v1/memory/records", {"scope": f"customer:1/{cls}:{i}", "subject": "cust-1",
                                                            "content_class": cls, "content": f"{cls} entry {i}"})
            assert answer.status_code == 201, answer.json()
            ids.setdefault(cls, []).append(answer.json()["id"])
    for i in range(2):
        answer = _post(agent, "/api/v1/memory/records", {"scope": f"user:jm/session:{i}", "subject": NFD,
                                                        "content_class": "chat", "content": f"the dispute, part {i}"})
        ids.setdefault("disputed", []).append(answer.json()["id"])
    assert _post(legal, "/api/v1/holds", {"matter": "Müller v. Acme", "authority": "court order 26-cv-9",
                                          "subject": NFC}).status_code == 201
    carol = _post(agent, "/api/v1/memory/records", {"scope": "user:carol@example.com/session:1", "subject": "carol",
                                                    "content_class": "chat", "content": "carol's note",
                                                    "tags": ["patient-carol@example.com"]}).json()["id"]
    return dict(agent=agent, agent_key=agent_key, legal=legal, ids=ids, carol=carol, connect=app_role)


def _protected_state() -> dict[int, tuple]:
    """Every record under an active lock or hold: what must survive, unaltered (hiding is permitted)."""
    now = timezone.now()
    return {r[0]: r[1:] for r in Record.objects.filter(held=True).union(
        Record.objects.filter(retained_until__gt=now)).values_list(
        "pk", "content", "commitment", "salt", "scope_id", "subject_id", "content_class_id", "created_at",
        "retained_until", "held", "lock_protects_content", "redacted_at")}


def _unaltered_or_redacted(was: tuple, now: tuple) -> bool:
    """The same record, or its permitted redaction: an existence-only lock (not held) lets the content and its
    salt go, with redacted_at set; the row, its id, times, commitment and lock stay."""
    content, commitment, salt, *identity, retained_until, held, protects_content, redacted_at = range(11)
    if was == now:
        return True
    redacted = (now[content] == "" and now[salt] == "" and now[redacted_at] is not None
                and not was[held] and not was[protects_content])
    same = all(now[i] == was[i] for i in (commitment, *identity, held, protects_content))
    return redacted and same and now[retained_until] >= was[retained_until]


def test_the_whole_attack_list_as_the_application_role_destroys_or_alters_nothing_protected(estate, mailoutbox):
    agent, ids, connect = estate["agent"], estate["ids"], estate["connect"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)")
        assert cursor.fetchone() == (APP_ROLE, False)
    replay = Replay()
    before = _protected_state()
    assert len(before) == 3 + 3 + 2 + 2
    all_ids = [pk for pks in ids.values() for pk in pks]
    trades = ids["trades"]

    # 1. A race at lock time: writers post into a class while legal places a compliance rule on it.
    fresh = []

    def racer():
        client, _ = _client("agent")
        for i in range(PER_RACER):
            answer = _post(client, "/api/v1/memory/records", {"scope": f"user:racer/session:{threading.get_ident() % 100000}{i}",
                                                             "subject": "racer", "content_class": "fresh",
                                                             "content": "written during the rule"})
            fresh.append(answer.json()["id"])

    def rule_placer():
        from memory.models import Tenant
        from retention.models import ContentClass
        tenant = Tenant.objects.get(name="acme")
        rule_create(tenant=tenant, content_class=ContentClass.objects.get(tenant=tenant, name="fresh"),
                    kind="regulatory", duration_days=2555, authority="MiFID II Art. 16(7)", mode="compliance",
                    actor="legal")

    barrier = threading.Barrier(RACERS + 1)
    errors = []

    def run(target):
        try:
            barrier.wait()
            target()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(racer,)) for _ in range(RACERS)]
    threads.append(threading.Thread(target=run, args=(rule_placer,)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    replay.attempt("hard forget of the records written during the rule", lambda: _post(
        agent, "/api/v1/memory/forget", {"target": {"subject": "racer"}, "mode": "hard"}).json()["status"])
    assert Record.objects.filter(pk__in=fresh).count() == RACERS * PER_RACER
    before.update({pk: v for pk, v in _protected_state().items() if pk in fresh})
    assert len(before) == 10 + RACERS * PER_RACER

    # 2. A longer governance rule masking a compliance rule; legal overrides the conflicts of an erasure.
    from memory.models import Subject, Tenant
    tenant = Tenant.objects.get(name="acme")
    request = SubjectRequest.objects.create(
        tenant=tenant, subject=Subject.objects.get(tenant=tenant, ref="cust-1"), type="erasure", regulation="gdpr",
        received_at=timezone.now(), due_date=date.today() + timedelta(days=30), contact_email="c@example.org",
        status=RequestStatus.VERIFIED, identity_verified_by="operator", identity_method="test",
        identity_verified_at=timezone.now())
    run_to_end(request.pk)
    for conflict in RetentionConflict.objects.filter(request=request):
        replay.attempt(f"legal override of conflict on record {conflict.record_id}", lambda c=conflict: conflict_override(
            conflict=c, actor="legal:alice", justification="we keep only what the governance rule says"))

    # 3. The lock-recompute grant as a switch: the issue's exact sequence, then pieces of it.
    replay.raw(connect, "forge a grant, unlock, delete, remove the grant",
               ("INSERT INTO retention_lockrecomputegrant (granted_at) VALUES (now())", []),
               ("UPDATE memory_record SET held = false, retained_until = NULL WHERE id = ANY(%s)", [all_ids]),
               ("DELETE FROM memory_record WHERE id = ANY(%s)", [all_ids]),
               ("DELETE FROM retention_lockrecomputegrant", []))
    for column, value in (("held", "false"), ("retained_until", "NULL"), ("lock_protects_content", "false")):
        replay.raw(connect, f"UPDATE the lock column {column}",
                   (f"UPDATE memory_record SET {column} = {value} WHERE id = ANY(%s)", [all_ids]))
    replay.raw(connect, "raw DELETE of every protected record", ("DELETE FROM memory_record WHERE id = ANY(%s)", [all_ids]))
    replay.raw(connect, "TRUNCATE memory_record", ("TRUNCATE memory_record CASCADE", []))
    replay.raw(connect, "disable the guard trigger", ("ALTER TABLE memory_record DISABLE TRIGGER USER", []))
    replay.raw(connect, "drop the guard function", ("DROP FUNCTION memory_record_guard() CASCADE", []))
    replay.raw(connect, "session_replication_role = replica", ("SET session_replication_role = replica", []),
               ("DELETE FROM memory_record WHERE id = ANY(%s)", [all_ids]))
    replay.raw(connect, "override function on compliance records",
               ("SELECT retention_lock_override(id) FROM memory_record WHERE id = ANY(%s)", [trades + ids["kyc"]]))
    replay.raw(connect, "recompute from the rules, then delete",
               ("SELECT retention_locks_recompute_classes(array_agg(DISTINCT content_class_id)) FROM memory_record", []),
               ("DELETE FROM memory_record WHERE id = ANY(%s)", [trades]))

    # 4. The rules and holds tables tampered with, then lawful-looking forgets.
    replay.attempt("ORM delete of the rules", lambda: RetentionRule.objects.all().delete())
    replay.raw(connect, "compliance rules made governance", ("UPDATE retention_retentionrule SET mode = 'governance'", []))
    replay.raw(connect, "compliance rules shortened", ("UPDATE retention_retentionrule SET duration_days = 1", []))
    replay.raw(connect, "compliance rules retired", ("UPDATE retention_retentionrule SET retired_at = now()", []))
    replay.attempt("ORM delete of the hold", lambda: LegalHold.objects.all().delete())
    replay.raw(connect, "hold retargeted", ("UPDATE retention_legalhold SET subject_id = NULL", []))
    replay.raw(connect, "table version rewritten", ("UPDATE retention_retentiontableversion SET rules = '[]'", []))
    replay.raw(connect, "table versions deleted", ("DELETE FROM retention_retentiontableversion", []))
    for mode in ("hard", "redact"):
        replay.attempt(f"agent {mode} forget of every protected record", lambda m=mode: _post(
            agent, "/api/v1/memory/forget", {"target": {"record_id": all_ids}, "mode": m}).json()["status"])

    # 5. Content rewritten under an existence-only lock.
    replay.attempt("ORM update of content", lambda: Record.objects.filter(pk__in=trades).update(content="TAMPERED"))

    def save_rewrite():
        record = Record.objects.get(pk=trades[0])
        record.content = "TAMPERED"
        record.save()
    replay.attempt("save() with new content", save_rewrite)

    def bulk_rewrite():
        records = list(Record.objects.filter(pk__in=trades))
        for r in records:
            r.content = "TAMPERED"
        Record.objects.bulk_update(records, ["content"])
    replay.attempt("bulk_update of content", bulk_rewrite)
    replay.raw(connect, "psql UPDATE content", ("UPDATE memory_record SET content = 'TAMPERED' WHERE id = ANY(%s)", [trades]))

    # 6. The subject's other spelling: forgets and an erasure by the NFD and padded forms.
    for spelling in (NFD, f" {NFC}  "):
        replay.attempt(f"hard forget by subject {spelling!r}", lambda s=spelling: _post(
            agent, "/api/v1/memory/forget", {"target": {"subject": s}, "mode": "hard"}).json()["status"])

    # 7. The admin's bulk "Forget (hard)" over every record, through the real changelist.
    admin = User.objects.create_superuser("root", "root@example.org", "pw-for-tests-only")
    browser = Client()
    browser.force_login(admin)

    def admin_forget():
        answer = browser.post("/admin/memory/record/", {"action": "forget_hard", "index": "0",
                                                        "_selected_action": [str(pk) for pk in all_ids]})
        assert answer.status_code < 500, answer.status_code
        return answer.status_code
    replay.attempt("admin bulk Forget (hard)", admin_forget)

    # 8. Bad input: every one a 4xx with a stable code.
    bad = [
        ("nested JSON", "/api/v1/memory/forget", "[" * 1000 + "]" * 1000),
        ("NUL in target.subject", "/api/v1/memory/forget", {"target": {"subject": "cust\x00-1"}, "mode": "hard"}),
        ("NUL in target.tag", "/api/v1/memory/forget", {"target": {"tag": "a\x00"}, "mode": "hard"}),
        ("received_at overflow", "/api/v1/requests", {"subject": "cust-1", "type": "erasure", "regulation": "gdpr",
                                                      "channel": "api", "received_at": "0001-01-01T00:00:00+14:00"}),
    ]
    operator, _ = _client("operator")
    for name, url, body in bad:
        client = operator if url == "/api/v1/requests" else agent
        answer = _post(client, url, body)
        assert 400 <= answer.status_code < 500 and answer.json()["code"], (name, answer.status_code)
        replay.attempts.append((name, f"refused: {answer.status_code} {answer.json()['code']}"))
    for url in ("/api/v1/memory/search?q=a%00b", "/api/v1/memory/fleet-notices?holder=a%00b"):
        answer = agent.get(url)
        assert answer.status_code == 400, (url, answer.status_code)
        replay.attempts.append((url, f"refused: 400 {answer.json()['code']}"))

    # Then: nothing protected destroyed or altered, and the audit finds no gap.
    after = _protected_state()
    destroyed = sorted(set(before) - set(after))
    altered = sorted(pk for pk in before if pk in after and not _unaltered_or_redacted(before[pk], after[pk]))
    report = "\n".join(f"{name}: {outcome}" for name, outcome in replay.attempts)
    assert (destroyed, altered) == ([], []), report
    assert len(replay.attempts) >= 40, report
    audit = coverage_audit(actor="test")
    assert audit.gaps == 0, audit.classes

    # And the public record names nobody: forget carol's scope and tag, read the tombstones as anyone can.
    carol_tombstones = []
    for target in ({"scope": "user:carol@example.com"}, {"tag": "patient-carol@example.com"}):
        answer = _post(agent, "/api/v1/memory/forget", {"target": target, "mode": "soft",
                                                       "reason": "Carol asked us, see ticket 4411"})
        assert answer.status_code == 200, answer.json()
        carol_tombstones.append(answer.json()["handle"]["tombstone_id"])
    public = Client()
    for tombstone_id in Tombstone.objects.values_list("id", flat=True):
        envelope = public.get(f"/api/v1/tombstones/{tombstone_id}")
        assert envelope.status_code == 200
        statement = json.dumps(envelope.json())
        payload = base64.b64decode(envelope.json()["payload"]).decode()
        for secret in ("carol", "example.com", "ticket 4411", estate["agent_key"][:8], "cust-1", "Müller",
                       NFD, "José"):
            assert secret not in payload and secret not in statement, (secret, payload)
    # No salt is kept for an agent's forget: nobody gets a receipt for it.
    assert not TombstoneSalts.objects.filter(tombstone_id__in=carol_tombstones).exists()
