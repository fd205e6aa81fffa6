"""Authorized agents (DRP) and the data rights requests they made, mapped onto dsr subject requests.

The mapping lives here, not on `dsr.SubjectRequest`: dsr does not know the protocol exists. Nothing here
holds personal data beyond what dsr holds: the subject's reference and contact address are on the subject
request; this table keeps which identity claims the agent sent and whether it said it verified them, never
their values.
"""
from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q


class Agent(models.Model):
    """An authorized agent's credentials for one tenant: its directory id, the Ed25519 key its requests are
    signed with, and the bearer token it presents (stored as a SHA-256 hash; shown once when issued)."""

    agent_id = models.CharField(max_length=64, help_text="The agent's id in the DRP service directory.")
    tenant = models.ForeignKey("memory.Tenant", on_delete=models.PROTECT, related_name="drp_agents")
    business_id = models.CharField(max_length=64, help_text="The `business-id` this agent's requests must name.")
    name = models.CharField(max_length=200, blank=True)
    verify_key = models.CharField(max_length=64, help_text="Base64 Ed25519 public key (the directory's verify_key).")
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    token_prefix = models.CharField(max_length=8, editable=False)
    token_issued_at = models.DateTimeField(editable=False)
    # `issued-at` of the last key setup message accepted (POST /v1/agent/{id}): a later one must be newer, so a
    # captured setup message cannot be replayed to mint a token.
    setup_issued_at = models.DateTimeField(null=True, blank=True, editable=False)
    active = models.BooleanField(default=True, help_text="An inactive agent's token and requests are refused.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "agent_id"], name="drp_agent_unique_per_tenant"),
            # The pair-wise key setup (POST /v1/agent/{id}) comes without a token: the agent id and the
            # business id it names must find one agent.
            models.UniqueConstraint(fields=["agent_id", "business_id"], name="drp_agent_unique_per_business"),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id} ({self.tenant})"


class DataRightsRequest(models.Model):
    """One DRP exercise: its public `request_id`, the agent, and the subject request it became (none when
    it was denied at intake: a right this service does not fulfil, no subject reference)."""

    request_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="requests")
    subject_request = models.OneToOneField("dsr.SubjectRequest", on_delete=models.PROTECT, null=True, blank=True,
                                           related_name="drp")
    exercise = models.CharField(max_length=32)
    regime = models.CharField(max_length=16, blank=True)
    drp_version = models.CharField(max_length=16)
    agent_request_id = models.CharField(max_length=200, blank=True)
    # {"email": "verified", "phone_number": "unverified", "name": "given", ...}: what the agent attested,
    # the operator's evidence for the identity step; never the values.
    claims = models.JSONField(default=dict, blank=True)
    # SHA-256 of the signed message: the same signed request sent twice is one request (a replay).
    message_digest = models.CharField(max_length=64, unique=True)
    # Denied at intake (DRP 0.9.4 section 3.02 reasons), with the details the status shows.
    denied_reason = models.CharField(max_length=32, blank=True)
    processing_details = models.TextField(blank=True)
    received_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "agent_request_id"], condition=~Q(agent_request_id=""),
                                    name="drp_agent_request_id_unique"),
        ]

    def __str__(self) -> str:
        return f"DRP {self.exercise} {self.request_id}"
