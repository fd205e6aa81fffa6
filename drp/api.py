"""The DRP 0.9.4 endpoints for authorized agents: discovery, exercise (create), status, revoke, and the
pair-wise key setup and agent information endpoints. Views parse, call one service or selector, present.

Errors take the protocol's shape (section 3.06): `{"code": "<HTTP status>", "message": ...}`, with this
service's stable code in `error` and `detail` (= message) as in the rest of the API.

These views are not in the ledger's OpenAPI schema (/api/schema/): their bodies are signed text/plain and
their errors are DRP's, specified by the protocol (tests/drp/schemas hold its JSON Schemas).
"""
from __future__ import annotations

from datetime import datetime

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import api_exception_handler
from drp import conf, errors, selectors, services, signing
from drp.auth import AgentBearerAuthentication, IsAgent
from drp.models import Agent

SIGNED_TYPES = ("text/plain", "application/octet-stream")


def drp_exception_handler(exc, context):
    response = api_exception_handler(exc, context)
    if response is None:
        return None
    body = response.data if isinstance(response.data, dict) else {}
    code = body.pop("code", "error")
    detail = str(body.pop("detail", code))
    response.data = {"code": str(response.status_code), "message": detail, "detail": detail, "error": code, **body}
    return response


class DrpView(APIView):
    authentication_classes = [AgentBearerAuthentication]
    permission_classes = [IsAgent]

    def get_exception_handler(self):
        return drp_exception_handler

    @staticmethod
    def signed_body(request) -> bytes:
        """The raw signed body (text/plain, section 3.07.1), bounded before it is read."""
        content_type = (request.content_type or "").split(";")[0].strip().lower()
        if content_type not in SIGNED_TYPES:
            raise errors.DrpError("unsupported_media_type", "A signed DRP request is sent as text/plain: "
                                  "base64(signature || JSON).", status_code=status.HTTP_415_UNSUPPORTED_MEDIA_TYPE)
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > signing.MAX_MESSAGE_BYTES:
            raise errors.DrpError("payload_too_large", f"A signed request is limited to {signing.MAX_MESSAGE_BYTES} "
                                  "bytes.", status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
        return request._request.body


@extend_schema(exclude=True)
class DiscoveryView(DrpView):
    """`GET /.well-known/data-rights.json`: this business's entry as DRP 0.9.4's Business Discovery Document
    (section 3.05.2), with the protocol version. Public."""

    authentication_classes: list = []
    permission_classes: list = []

    def get(self, request):
        return Response({
            "id": conf.business_id(),
            "name": conf.business_name(),
            "logo": None,
            "api_base": request.build_absolute_uri("/").rstrip("/"),
            "supported_actions": services.SUPPORTED_ACTIONS,
            "supported_verifications": ["email"],
            "drp.version": conf.DRP_VERSION,
        })


@extend_schema(exclude=True)
class ExerciseView(DrpView):
    """`POST /v1/data-rights-request`: a signed exercise; answers its status (section 2.01.1)."""

    def post(self, request):
        row = services.exercise_create(agent=request.auth, body=self.signed_body(request))
        return Response(selectors.status_of(row))


@extend_schema(exclude=True)
class RequestView(DrpView):
    """`GET` (status, section 2.02) and `DELETE` (revoke, section 2.04) of one request of this agent."""

    def get(self, request, request_id: str):
        row = selectors.request_for_agent(agent=request.auth, request_id=request_id)
        return Response(selectors.status_of(row))

    def delete(self, request, request_id: str):
        row = selectors.request_for_agent(agent=request.auth, request_id=request_id)
        body = self.signed_body(request)
        return Response(selectors.status_of(services.exercise_revoke(row=row, body=body)))


@extend_schema(exclude=True)
class AgentView(DrpView):
    """`POST /v1/agent/{agent-id}` (pair-wise key setup, section 2.05: a message signed with the agent's
    registered key gets a new token) and `GET` (agent information, section 2.06)."""

    def get_authenticators(self):
        # The key setup comes without a token: the signature is its authentication.
        if self.request is not None and self.request.method == "POST":
            return []
        return super().get_authenticators()

    def get_permissions(self):
        if self.request is not None and self.request.method == "POST":
            return []
        return super().get_permissions()

    def get(self, request, agent_id: str):
        if agent_id != request.auth.agent_id:
            raise errors.forbidden("agent_mismatch", "This token belongs to another agent.")
        return Response({})

    def post(self, request, agent_id: str):
        body = self.signed_body(request)
        agent, issued_at = self._agent_for(agent_id, body)
        token = services.agent_token_issue(agent=agent, actor=f"drp:{agent.agent_id}", setup_issued_at=issued_at)
        return Response({"agent-id": agent.agent_id, "token": token})

    @staticmethod
    def _agent_for(agent_id: str, body: bytes) -> tuple[Agent, datetime]:
        """The active agent `agent_id` whose key verifies the message and whose business the message names.
        Section 2.05.1: any failure is 403 (the body says which, with a stable code)."""
        candidates = list(Agent.objects.select_related("tenant").filter(agent_id=agent_id[:64], active=True))
        if not candidates:
            raise errors.forbidden("unknown_agent", "No active agent is registered with this id.")
        # The agent id may be registered with several businesses (tenants); the signed `business-id` picks one,
        # and only after its signature verified with that registration's key.
        failure = None
        for agent in candidates:
            try:
                message = signing.message_open(body, verify_key=agent.verify_key)
                services.envelope_check(agent=agent, message=message, path_agent_id=agent_id)
                return agent, services.message_issued_at(message)
            except errors.DrpError as exc:
                failure = exc
        if failure is not None and failure.status_code in (400, 413):
            raise failure
        raise errors.forbidden(getattr(failure, "code", "invalid_signature"),
                               getattr(failure, "detail", "The key setup request did not verify.")) from None
