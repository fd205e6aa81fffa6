"""The public log and key endpoints: no login, rate-limited, JSON errors with stable codes."""
from __future__ import annotations

import re

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from config.schema import ErrorSerializer

from .dsse import b64encode
from .errors import TombstoneError
from .jwk import format_time
from .note import checkpoint_parse
from .ratelimit import rate_limit_check
from .selectors import consistency_proof_get, envelope_of, inclusion_proof_get, jwks_document, tombstone_get
from .services import checkpoint_sign, keys_ensure

MAX_INT_PARAM = 2**62
DECIMAL = re.compile(r"[0-9]{1,19}")


def _int_param(request, name: str, *, required: bool = True) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        if required:
            raise TombstoneError("invalid_parameter", f"`{name}` is required.", {"parameter": name})
        return None
    if not DECIMAL.fullmatch(raw) or int(raw) > MAX_INT_PARAM:  # not isdigit(): "²" is a digit to it
        raise TombstoneError("invalid_parameter", f"`{name}` must be a non-negative integer.", {"parameter": name})
    return int(raw)


def _size_param(request, name: str) -> int:
    """A tree size from the query, by default the size of the latest checkpoint (signed now if need be)."""
    size = _int_param(request, name, required=False)
    return checkpoint_sign().tree_size if size is None else size


def _b64_list(hashes: list[bytes]) -> list[str]:
    return [b64encode(h) for h in hashes]


class PublicView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        rate_limit_check(request=request, bucket="api", limit=settings.LEDGER_PUBLIC_API_RATE_LIMIT)


Base64List = serializers.ListField(child=serializers.CharField(), help_text="base64 SHA-256 hashes")


class KeySetView(PublicView):
    @extend_schema(responses={200: inline_serializer("KeySet", {"keys": serializers.ListField(
        child=serializers.DictField(), help_text="JWKs (RFC 7517, OKP Ed25519), current and retired")})},
        summary="Every tombstone and checkpoint key (JWKS)")
    def get(self, request):
        keys_ensure()
        response = Response(jwks_document())
        response["Cache-Control"] = "public, max-age=60"
        return response


class CheckpointView(PublicView):
    @extend_schema(responses={200: inline_serializer("Checkpoint", {
        "origin": serializers.CharField(), "tree_size": serializers.IntegerField(),
        "root_hash": serializers.CharField(), "time": serializers.CharField(), "note": serializers.CharField()}),
        503: ErrorSerializer}, summary="The log's latest signed checkpoint")
    def get(self, request):
        checkpoint = checkpoint_sign()
        parsed, _ = checkpoint_parse(checkpoint.note)
        return Response({"origin": parsed.origin, "tree_size": checkpoint.tree_size,
                         "root_hash": b64encode(bytes(checkpoint.root)), "time": format_time(parsed.time),
                         "note": checkpoint.note})


class InclusionView(PublicView):
    @extend_schema(
        parameters=[OpenApiParameter("tombstone_id", str), OpenApiParameter("leaf_index", int),
                    OpenApiParameter("tree_size", int, description="default: the latest checkpoint's size")],
        responses={200: inline_serializer("InclusionProof", {
            "leaf_index": serializers.IntegerField(), "tree_size": serializers.IntegerField(), "hashes": Base64List}),
            503: ErrorSerializer},
        summary="An inclusion proof (RFC 9162) for a tombstone")
    def get(self, request):
        if request.query_params.get("tombstone_id"):
            leaf_index = tombstone_get(tombstone_id=request.query_params["tombstone_id"]).leaf_index
        else:
            leaf_index = _int_param(request, "leaf_index")
        tree_size = _size_param(request, "tree_size")
        hashes = inclusion_proof_get(leaf_index=leaf_index, tree_size=tree_size)
        return Response({"leaf_index": leaf_index, "tree_size": tree_size, "hashes": _b64_list(hashes)})


class ConsistencyView(PublicView):
    @extend_schema(
        parameters=[OpenApiParameter("first", int, required=True),
                    OpenApiParameter("second", int, description="default: the latest checkpoint's size")],
        responses={200: inline_serializer("ConsistencyProof", {
            "first": serializers.IntegerField(), "second": serializers.IntegerField(), "hashes": Base64List}),
            503: ErrorSerializer},
        summary="A consistency proof (RFC 9162) between two tree sizes")
    def get(self, request):
        first, second = _int_param(request, "first"), _size_param(request, "second")
        hashes = consistency_proof_get(first=first, second=second)
        return Response({"first": first, "second": second, "hashes": _b64_list(hashes)})


class TombstoneView(PublicView):
    @extend_schema(responses={200: inline_serializer("Envelope", {
        "payloadType": serializers.CharField(), "payload": serializers.CharField(help_text="base64 statement"),
        "signatures": serializers.ListField(child=inline_serializer("EnvelopeSignature", {
            "keyid": serializers.CharField(), "sig": serializers.CharField()}))})},
        summary="A tombstone's signed DSSE envelope")
    def get(self, request, tombstone_id: str):
        return Response(envelope_of(tombstone_get(tombstone_id=tombstone_id)))
