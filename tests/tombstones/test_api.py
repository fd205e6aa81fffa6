"""The public endpoints: no login, JSON with stable codes, proofs that verify, 4xx (never 500) on bad input."""
import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from tombstones import merkle
from tombstones.dsse import b64decode
from tombstones.jwk import b64url_decode, jwks_parse, thumbprint
from tombstones.note import checkpoint_parse, checkpoint_signer
from tombstones.selectors import log_root_at

from .factories import TenantFactory, tombstone_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def client():
    return APIClient()


@pytest.fixture
def logged():
    tenant = TenantFactory()
    return [tombstone_make(tenant) for _ in range(5)]


def test_key_set_is_public_and_lists_ed25519_keys_by_thumbprint(client, logged):
    response = client.get("/.well-known/tombstone-keys.json", HTTP_AUTHORIZATION="Token garbage")
    assert response.status_code == 200 and response["Content-Type"].startswith("application/json")
    keys = response.json()["keys"]
    assert {k["purpose"] for k in keys} == {"tombstone", "checkpoint"}
    for jwk in keys:
        assert jwk["kid"] == thumbprint(b64url_decode(jwk["x"])) and "d" not in jwk


def test_checkpoint_is_a_signed_note_over_the_current_root(client, logged):
    body = client.get("/api/v1/log/checkpoint").json()
    checkpoint, signatures = checkpoint_parse(body["note"])
    signer, ok = checkpoint_signer(checkpoint, signatures, jwks_parse(client.get(
        "/.well-known/tombstone-keys.json").json()).values())
    assert ok and signer.purpose == "checkpoint"
    assert checkpoint.size == body["tree_size"] == 5 and checkpoint.root == log_root_at(tree_size=5)
    assert body["origin"] == "ledger.test/tombstones"


def test_inclusion_proof_by_tombstone_id_verifies_against_the_checkpoint(client, logged):
    from tombstones.dsse import pae

    tombstone = logged[3]
    body = client.get("/api/v1/log/inclusion", {"tombstone_id": str(tombstone.id)}).json()
    root = b64decode(client.get("/api/v1/log/checkpoint").json()["root_hash"])
    leaf = merkle.leaf_hash(pae(tombstone.payload_type, bytes(tombstone.payload)))
    assert body["leaf_index"] == 3 and body["tree_size"] == 5
    assert merkle.verify_inclusion(3, 5, leaf, [b64decode(h) for h in body["hashes"]], root)
    by_index = client.get("/api/v1/log/inclusion", {"leaf_index": 3, "tree_size": 4}).json()
    assert merkle.verify_inclusion(3, 4, leaf, [b64decode(h) for h in by_index["hashes"]], log_root_at(tree_size=4))


def test_consistency_proof_between_two_sizes_verifies(client, logged):
    body = client.get("/api/v1/log/consistency", {"first": 2}).json()
    assert (body["first"], body["second"]) == (2, 5)
    assert merkle.verify_consistency(2, 5, log_root_at(tree_size=2), log_root_at(tree_size=5),
                                     [b64decode(h) for h in body["hashes"]])


def test_tombstone_endpoint_returns_the_signed_envelope(client, logged):
    body = client.get(f"/api/v1/tombstones/{logged[0].id}").json()
    assert set(body) == {"payloadType", "payload", "signatures"}
    assert b64decode(body["payload"]) == bytes(logged[0].payload)


@pytest.mark.parametrize("url, params, status, code", [
    ("/api/v1/log/inclusion", {}, 400, "invalid_parameter"),
    ("/api/v1/log/inclusion", {"leaf_index": "abc"}, 400, "invalid_parameter"),
    ("/api/v1/log/inclusion", {"leaf_index": "-1"}, 400, "invalid_parameter"),
    ("/api/v1/log/inclusion", {"leaf_index": "1", "tree_size": "99"}, 400, "tree_size_out_of_range"),
    ("/api/v1/log/inclusion", {"leaf_index": "7", "tree_size": "5"}, 400, "invalid_parameter"),
    ("/api/v1/log/inclusion", {"leaf_index": "9" * 40}, 400, "invalid_parameter"),
    ("/api/v1/log/inclusion", {"tombstone_id": "not-a-uuid"}, 404, "tombstone_not_found"),
    ("/api/v1/log/consistency", {}, 400, "invalid_parameter"),
    ("/api/v1/log/consistency", {"first": "0"}, 400, "invalid_parameter"),
    ("/api/v1/log/consistency", {"first": "4", "second": "2"}, 400, "invalid_parameter"),
    ("/api/v1/log/consistency", {"first": "1", "second": "6"}, 400, "tree_size_out_of_range"),
    ("/api/v1/tombstones/00000000-0000-0000-0000-000000000000", {}, 404, "tombstone_not_found"),
    ("/api/v1/tombstones/%00%ff", {}, 404, "tombstone_not_found"),
])
def test_bad_input_gets_a_4xx_with_a_stable_code(client, logged, url, params, status, code):
    response = client.get(url, params)
    assert (response.status_code, response.json()["code"]) == (status, code)
    assert response.json()["detail"]


@given(st.dictionaries(st.sampled_from(["leaf_index", "tree_size", "first", "second", "tombstone_id"]),
                       st.text(max_size=30), max_size=3))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_no_query_string_makes_a_proof_endpoint_fail_with_a_server_error(client, logged, params):
    for url in ("/api/v1/log/inclusion", "/api/v1/log/consistency", "/api/v1/log/checkpoint"):
        response = client.get(url, params)
        assert response.status_code < 500, (url, params, response.content)


def test_public_endpoints_are_rate_limited_per_address(client, logged, settings):
    settings.LEDGER_PUBLIC_API_RATE_LIMIT = 3
    statuses = [client.get("/api/v1/log/checkpoint").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    body = client.get("/.well-known/tombstone-keys.json").json()
    assert body["code"] == "rate_limited" and body["retry_after"] >= 1
    other = APIClient(REMOTE_ADDR="10.0.0.9")
    assert other.get("/api/v1/log/checkpoint").status_code == 200


def test_proof_endpoints_read_a_bounded_number_of_queries(client, django_assert_max_num_queries):
    tenant = TenantFactory()
    with transaction.atomic():
        for _ in range(40):
            tombstone_make(tenant)
    client.get("/api/v1/log/checkpoint")
    with django_assert_max_num_queries(4):
        client.get("/api/v1/log/inclusion", {"leaf_index": 17, "tree_size": 40})
    with django_assert_max_num_queries(6):
        client.get("/api/v1/log/consistency", {"first": 17})


def test_the_schema_documents_the_public_endpoints():
    from drf_spectacular.generators import SchemaGenerator

    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    assert {"/api/v1/log/checkpoint", "/api/v1/log/inclusion", "/api/v1/log/consistency",
            "/api/v1/tombstones/{tombstone_id}", "/.well-known/tombstone-keys.json"} <= paths.keys()


def test_checkpoint_command_and_task_sign_once_per_log_size(logged, capsys):
    from django.core.management import call_command

    from tombstones.models import Checkpoint
    from tombstones.tasks import checkpoint_sign_task

    call_command("tombstone_checkpoint")
    assert capsys.readouterr().out.startswith("ledger.test/tombstones\n5\n")
    assert checkpoint_sign_task() == 5
    assert Checkpoint.objects.filter(tree_size=5).count() == 1
