"""The drp app's writes: register an agent (and issue its token), take a signed exercise in, revoke one.

An exercise becomes a dsr subject request through `dsr.services.request_create`, the same path as the
operators' API: same validation, same due date, same history. What DRP adds is in this app's table.

Decisions (README "Authorized agents (Data Rights Protocol)"):
- Identity claims are evidence, never a verification. DRP 0.9.4 section 3.04: "Covered Businesses SHALL
  determine for themselves the level of reliance they will place on a given token", and dsr's identity step
  records who verified and how. So a request arrives `received`; the claims the agent sent (names and
  whether the agent says it verified them, not their values) go into the request's history for the operator,
  who verifies or rejects as for any request.
- The subject is named by the business's own reference, in the custom claim `subject_ref` (section 3.04
  allows custom claims): a subject reference here is opaque and never an e-mail address (memory.models.
  Subject). A request without one is denied `no_match`, and nothing personal is kept.
- `email` becomes the request's contact address (where dsr tells the subject the outcome); phone number,
  name and address are not stored.
"""
from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from drp import conf, errors, signing
from drp.models import Agent, DataRightsRequest
from dsr import services as dsr_services
from dsr.models import Channel, Regulation, RequestStatus, RequestType
from memory.auth import token_hash, token_key_new
from memory.models import Tenant
from memory.subjects import subject_ref_normalize

AGENT_ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
# The sender's clock may run this much ahead of ours (section 3.07 asks that `issued-at` be in the past).
ISSUED_AT_SKEW = timedelta(minutes=1)

# DRP 0.9.4 section 3.01: the rights, and the subject request each becomes here (None: not fulfilled by this
# service, answered `denied` / `claim_not_covered`). `sale:opt-out` / `sale:opt-in` are the spelling of the
# spec's section 2.01 example; the table and the directory schema write `sale:opt_out`.
RIGHTS: dict[str, str | None] = {
    "deletion": RequestType.ERASURE,
    "access": RequestType.ACCESS,
    "access:categories": None,
    "access:specific": None,
    "sale:opt_out": None,
    "sale:opt_in": None,
    "sale:opt-out": None,
    "sale:opt-in": None,
}
SUPPORTED_ACTIONS = [right for right, kind in RIGHTS.items() if kind is not None]
NOT_COVERED = {
    "access:categories": "This service answers an access request with the data itself (`access`); it does not "
                         "produce a categories-only report.",
    "access:specific": "The schema and semantics of `access:specific` are not yet declared by the protocol; ask "
                       "for `access`.",
}
NOT_SOLD = "This service stores agent memory and does not sell personal data: there is no sale to opt out of or in to."
# `regime` absent: a voluntary request (section 2.01); dsr counts its deadline as for "other" laws.
REGIMES = {"ccpa": Regulation.CCPA, None: Regulation.OTHER}

STRING_CLAIMS = ("name", "email", "phone_number", "power_of_attorney")
VERIFIED_CLAIMS = {"email": "email_verified", "phone_number": "phone_number_verified", "address": "address_verified"}
ENVELOPE = ("agent-id", "business-id", "issued-at", "expires-at", "drp.version")
KNOWN_KEYS = {*ENVELOPE, "agent-request-id", "exercise", "regime", "relationships", "status_callback", "subject_ref",
              *STRING_CLAIMS, "address", *VERIFIED_CLAIMS.values()}
MAX_CLAIM_CHARS = 500


def _actor(agent: Agent) -> str:
    return f"drp:{agent.agent_id}"


def agent_id_valid(agent_id: object) -> str:
    if not isinstance(agent_id, str) or not 0 < len(agent_id) <= 64 or set(agent_id) - set(AGENT_ID_CHARS):
        raise errors.invalid("invalid_agent_id", "An agent id is 1 to 64 characters of A-Z, 0-9 and _.")
    return agent_id


def _token_new() -> tuple[str, dict]:
    key = token_key_new()
    return key, {"token_hash": token_hash(key), "token_prefix": key[:8], "token_issued_at": timezone.now()}


def agent_register(*, tenant: Tenant, agent_id: str, verify_key: str, business_id: str = "", name: str = "",
                   actor: str) -> tuple[Agent, str]:
    """Register an authorized agent for `tenant` (or re-key one already registered: new key, new token, active
    again) and issue its bearer token; returns the agent and the token, which is not stored and is shown once."""
    agent_id_valid(agent_id)
    business_id = agent_id_valid(business_id or conf.business_id())
    signing.verify_key_load(verify_key)
    if not isinstance(name, str) or len(name) > 200:
        raise errors.invalid("invalid_name", "name is a string of at most 200 characters.")
    key, token_fields = _token_new()
    try:
        with transaction.atomic():
            agent, _ = Agent.objects.update_or_create(
                tenant=tenant, agent_id=agent_id,
                defaults={"business_id": business_id, "verify_key": verify_key, "name": name, "active": True,
                          **token_fields})
    except IntegrityError:
        raise errors.conflict("agent_exists", "Another tenant has this agent id under this business id.") from None
    return agent, key


def agent_token_issue(*, agent: Agent, actor: str, setup_issued_at: datetime | None = None) -> str:
    """A new bearer token for the agent; the previous one stops working at once. `setup_issued_at`: the
    `issued-at` of the key setup message asking for it (section 2.05), which must be newer than the last one
    accepted: a captured setup message replayed within its window mints nothing (403 `replayed_request`)."""
    key, token_fields = _token_new()
    agents = Agent.objects.filter(pk=agent.pk)
    if setup_issued_at is not None:
        token_fields["setup_issued_at"] = setup_issued_at
        agents = agents.filter(Q(setup_issued_at__isnull=True) | Q(setup_issued_at__lt=setup_issued_at))
    if not agents.update(**token_fields):
        raise errors.forbidden("replayed_request", "This key setup message is not newer than the last one accepted; "
                               "sign a new one.")
    for name, value in token_fields.items():
        setattr(agent, name, value)
    return key


def agent_deactivate(*, agent: Agent, actor: str) -> None:
    Agent.objects.filter(pk=agent.pk).update(active=False)
    agent.active = False


def _instant(message: dict, name: str) -> datetime:
    value = message.get(name)
    parsed = None
    if isinstance(value, str):
        try:
            parsed = parse_datetime(value)
        except ValueError:
            parsed = None
    if parsed is None or parsed.utcoffset() is None:
        raise errors.invalid("invalid_timestamp", f"`{name}` must be an ISO 8601 timestamp with its UTC offset.")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise errors.invalid("invalid_timestamp", f"`{name}` is out of range.") from None


def message_issued_at(message: dict) -> datetime:
    return _instant(message, "issued-at")


def envelope_check(*, agent: Agent, message: dict, path_agent_id: str | None = None) -> None:
    """Section 3.07, after the signature: the agent, the business, the time window, the version."""
    missing = [name for name in ENVELOPE if name not in message]
    if missing:
        raise errors.invalid("missing_claims", f"The signed message lacks {', '.join(missing)}.", claims=missing)
    if message["agent-id"] != agent.agent_id or (path_agent_id is not None and path_agent_id != agent.agent_id):
        raise errors.forbidden("agent_mismatch", "`agent-id` is not the agent this token (or URL) belongs to.")
    if message["business-id"] != agent.business_id:
        raise errors.forbidden("business_mismatch", "`business-id` does not name this business.")
    issued_at, expires_at = _instant(message, "issued-at"), _instant(message, "expires-at")
    now = timezone.now()
    if issued_at > now + ISSUED_AT_SKEW:
        raise errors.invalid("issued_in_future", "`issued-at` is in the future: the sender's clock runs fast.")
    if now >= expires_at:
        raise errors.DrpError("request_expired", "`expires-at` has passed; sign a new request.", {"fatal": True},
                              status_code=400)
    if message["drp.version"] not in conf.ACCEPTED_VERSIONS:
        raise errors.invalid("unsupported_version", f"This service speaks DRP {conf.DRP_VERSION}.",
                             supported=list(conf.ACCEPTED_VERSIONS))


def _claims(message: dict) -> tuple[dict, str, str | None]:
    """(what the agent attested, by claim: "verified" / "unverified" / "given"; the contact e-mail; the
    subject reference). Wrong types are refused, values are not kept."""
    attested = {}
    for name in STRING_CLAIMS:
        value = message.get(name)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_CLAIM_CHARS:
            raise errors.invalid("invalid_claim", f"`{name}` must be a non-empty string.", claim=name)
        attested[name] = "given"
    address = message.get("address")
    if address is not None:
        if not isinstance(address, (dict, str)) or len(str(address)) > MAX_CLAIM_CHARS:
            raise errors.invalid("invalid_claim", "`address` must be an OpenID Connect address object or a string.",
                                 claim="address")
        attested["address"] = "given"
    for claim, flag in VERIFIED_CLAIMS.items():
        value = message.get(flag)
        if value is None:
            continue
        if not isinstance(value, bool):
            raise errors.invalid("invalid_claim", f"`{flag}` must be true or false.", claim=flag)
        if claim in attested:
            attested[claim] = "verified" if value else "unverified"
    subject_ref = message.get("subject_ref")
    if subject_ref is not None:
        subject_ref = subject_ref_normalize(subject_ref)
    return attested, (message.get("email") or "").strip(), subject_ref


def _optional_string(message: dict, name: str, max_chars: int) -> str:
    value = message.get(name)
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > max_chars:
        raise errors.invalid(f"invalid_{name.replace('-', '_').replace('.', '_')}",
                             f"`{name}` must be a string of at most {max_chars} characters.")
    return value


def exercise_parse(message: dict) -> dict:
    """The request fields of an exercise (section 2.01), checked; nothing is written."""
    exercise = message.get("exercise")
    if not isinstance(exercise, str) or exercise not in RIGHTS:
        raise errors.invalid("unknown_right", "`exercise` must be one of the rights of DRP 0.9.4 section 3.01.",
                             rights=sorted(RIGHTS))
    regime = message.get("regime")
    if regime not in REGIMES:
        raise errors.invalid("unsupported_regime", "`regime` is \"ccpa\" or absent (a voluntary request).")
    relationships = message.get("relationships")
    if relationships is not None and (not isinstance(relationships, list) or len(relationships) > 20
                                      or not all(isinstance(r, str) and len(r) <= 100 for r in relationships)):
        raise errors.invalid("invalid_relationships", "`relationships` must be a list of short strings.")
    _optional_string(message, "status_callback", 2000)
    unknown = sorted(set(message) - KNOWN_KEYS)
    if len(unknown) > 50:
        raise errors.invalid("too_many_claims", "The message carries too many claims.")
    attested, email, subject_ref = _claims(message)
    return {"exercise": exercise, "regime": regime or "", "regulation": REGIMES[regime],
            "agent_request_id": _optional_string(message, "agent-request-id", 200),
            "attested": attested, "email": email, "subject_ref": subject_ref, "version": message["drp.version"]}


def _evidence_note(agent: Agent, fields: dict) -> str:
    claims = ", ".join(f"{name} ({state})" for name, state in sorted(fields["attested"].items())) or "none"
    return (f"DRP {fields['version']} `{fields['exercise']}` from authorized agent {agent.agent_id}; identity claims "
            f"(as the agent attests them, values not kept): {claims}. Verify the identity before starting.")


def exercise_create(*, agent: Agent, body: bytes) -> DataRightsRequest:
    """Take a signed exercise (section 2.01) in: verify it, then create the subject request through dsr, or
    record it denied at intake when it cannot become one. Bad input raises and writes nothing."""
    message = signing.message_open(body, verify_key=agent.verify_key)
    envelope_check(agent=agent, message=message)
    fields = exercise_parse(message)
    digest = hashlib.sha256(body.strip()).hexdigest()
    if DataRightsRequest.objects.filter(message_digest=digest).exists():
        raise errors.conflict("replayed_request", "This signed request was already received.")
    if fields["agent_request_id"]:
        earlier = DataRightsRequest.objects.filter(agent=agent, agent_request_id=fields["agent_request_id"]).first()
        if earlier is not None:
            raise errors.conflict("duplicate_agent_request_id", "This agent-request-id was already used.",
                                  request_id=str(earlier.request_id))
    kind = RIGHTS[fields["exercise"]]
    denied, details = "", ""
    if kind is None:
        denied = "claim_not_covered"
        details = NOT_COVERED.get(fields["exercise"], NOT_SOLD)
    elif fields["subject_ref"] is None:
        denied = "no_match"
        details = ("This business identifies a data subject by its own reference: send it in the `subject_ref` "
                   "claim (the account id the user has with the business).")
    now = timezone.now()
    row = DataRightsRequest(
        agent=agent, exercise=fields["exercise"], regime=fields["regime"], drp_version=fields["version"],
        agent_request_id=fields["agent_request_id"], claims=fields["attested"], message_digest=digest,
        denied_reason=denied, processing_details=details, received_at=now)
    try:
        with transaction.atomic():
            if not denied:
                subject_request = dsr_services.request_create(
                    tenant=agent.tenant, subject_ref=fields["subject_ref"], type=kind,
                    regulation=fields["regulation"], channel=Channel.API, received_at=now,
                    contact_email=fields["email"], actor=_actor(agent))
                dsr_services.history_add(request=subject_request, action="drp_identity_claims", actor=_actor(agent),
                                         note=_evidence_note(agent, fields))
                row.subject_request = subject_request
            row.save()
    except IntegrityError:
        # Two copies of the same request at once: the other one was taken.
        raise errors.conflict("replayed_request", "This signed request was already received.") from None
    return row


REVOCABLE = (RequestStatus.RECEIVED, RequestStatus.VERIFIED)


def exercise_revoke(*, row: DataRightsRequest, body: bytes) -> DataRightsRequest:
    """Section 2.04: the agent revokes a request whose workflow has not started: the subject request is
    closed (dsr `request_close`) with the reason. A request already being executed cannot be revoked."""
    agent = row.agent
    message = signing.message_open(body, verify_key=agent.verify_key)
    reason = message.get("reason")
    if reason is not None and (not isinstance(reason, str) or len(reason) > 1000):
        raise errors.invalid("invalid_reason", "`reason` must be a string of at most 1000 characters.")
    if row.revoked_at is not None:
        raise errors.conflict("already_revoked", "This request was already revoked.")
    subject_request = row.subject_request
    if subject_request is None:
        raise errors.conflict("not_revocable", "This request was denied; there is nothing to revoke.")
    if subject_request.status not in REVOCABLE:
        raise errors.conflict("not_revocable", "This request is being carried out or is finished; it cannot be "
                              "revoked.", status=subject_request.status)
    reason = (reason or "").strip()
    note = f"Revoked by authorized agent {agent.agent_id}" + (f": {reason}" if reason else ".")
    now = timezone.now()
    with transaction.atomic():
        claimed = DataRightsRequest.objects.filter(pk=row.pk, revoked_at__isnull=True).update(revoked_at=now)
        if not claimed:
            raise errors.conflict("already_revoked", "This request was already revoked.")
        dsr_services.request_close(request=subject_request, actor=_actor(agent), reason=note)
    row.revoked_at = now
    return row
