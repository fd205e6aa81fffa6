"""DRP test helpers: an agent's Ed25519 key pair, messages signed as libsodium's combined mode does
(signature || JSON, base64), the spec's schemas (schemas/, DRP 0.9.4) and a client with an agent's token."""
from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jsonschema
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from rest_framework.test import APIClient

from drp.services import agent_register

SCHEMAS = Path(__file__).parent / "schemas"
FORMATS = jsonschema.Draft202012Validator.FORMAT_CHECKER


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"drp-0.9.4-{name}.schema.json").read_text())


def assert_valid(instance, name: str) -> None:
    jsonschema.Draft202012Validator(schema(name), format_checker=FORMATS).validate(instance)
    # jsonschema checks "date-time" only with an optional package: check the timestamps here.
    for key in ("received_at", "expected_by", "issued-at", "expires-at"):
        if isinstance(instance, dict) and key in instance:
            assert datetime.fromisoformat(instance[key]).utcoffset() is not None, (key, instance[key])


def is_valid(instance, name: str) -> bool:
    return jsonschema.Draft202012Validator(schema(name), format_checker=FORMATS).is_valid(instance)


class AgentKeys:
    def __init__(self):
        self.private = Ed25519PrivateKey.generate()
        public = self.private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.verify_key = base64.b64encode(public).decode()

    def sign(self, message) -> str:
        raw = message if isinstance(message, bytes) else json.dumps(message).encode()
        return base64.b64encode(self.private.sign(raw) + raw).decode()


def stamp(**delta) -> str:
    return (datetime.now(UTC) + timedelta(**delta)).isoformat().replace("+00:00", "Z")


def exercise(agent_id="AGENT_A", business_id="FORGETTING_LEDGER", **fields) -> dict:
    message = {"agent-id": agent_id, "business-id": business_id, "issued-at": stamp(seconds=-5),
               "expires-at": stamp(minutes=10), "drp.version": "0.9.4", "exercise": "deletion", "regime": "ccpa",
               "relationships": ["customer"], "subject_ref": "cust-1001", "name": "Ann Example",
               "email": "ann@example.org", "email_verified": True, "phone_number": "+14155550100",
               "phone_number_verified": False}
    message.update(fields)
    return {k: v for k, v in message.items() if v is not ...}


class Drp:
    """One registered agent: its keys, its token, a client that sends its token."""

    def __init__(self, tenant, agent_id="AGENT_A"):
        self.keys = AgentKeys()
        self.agent, self.token = agent_register(tenant=tenant, agent_id=agent_id, verify_key=self.keys.verify_key,
                                                actor="test")
        self.client = APIClient()
        self.client.credentials(HTTP_AUTHORIZATION=f"Bearer {self.token}")

    def post(self, message, *, url="/v1/data-rights-request", content_type="text/plain", keys=None):
        body = message if isinstance(message, str) else (keys or self.keys).sign(message)
        return self.client.generic("POST", url, body, content_type=content_type)

    def create(self, **fields):
        message = exercise(agent_id=self.agent.agent_id, **fields)
        if message.get("exercise") not in ("sale:opt-out", "sale:opt-in"):  # the spelling of the 2.01 example
            assert is_valid(message, "exercise-request"), message  # what is accepted is the spec's
        response = self.post(message)
        assert response.status_code == 200, response.content
        assert_valid(response.json(), "exercise-status")
        return response.json()

    def status(self, request_id):
        response = self.client.get(f"/v1/data-rights-request/{request_id}")
        assert response.status_code == 200, response.content
        assert_valid(response.json(), "exercise-status")
        return response.json()

    def revoke(self, request_id, reason="I changed my mind", keys=None):
        body = (keys or self.keys).sign({"reason": reason} if reason is not None else {})
        return self.client.generic("DELETE", f"/v1/data-rights-request/{request_id}", body, content_type="text/plain")


@pytest.fixture
def drp(tenant):
    return Drp(tenant)


@pytest.fixture
def other_drp(tenant):
    return Drp(tenant, agent_id="AGENT_B")


@pytest.fixture
def foreign_drp(other_tenant):
    return Drp(other_tenant, agent_id="AGENT_C")
