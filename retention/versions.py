"""Signed retention table versions, chained: what the coverage audit believes about the mandates.

Each version is signed when it is made (`version_sign_new`, from `retention.services._version_new`) with the
tombstones app's current tombstone key (Ed25519), over the DSSE pre-authentication encoding of its own payload
type (`PAYLOAD_TYPE`: a version's signature can never pass for a tombstone's, nor the reverse) and the RFC 8785
canonical form of `version_statement`: tenant id, number, rules (each with its content class's id and name),
creation time, and `previous_digest`, the SHA-256 of the statement of the version it follows. That version is
the latest one whose signature verifies, so a version dropped from the chain (or one inserted, which cannot be
signed without the key) is seen: the next genuine version names a digest that is not its predecessor's.

The audit (`versions_verified`) trusts a version when its signature verifies with a published tombstone key
(valid then, not compromised by then) and its `previous_digest` is the digest of the latest version before it
whose signature verifies. Every other version is an anomaly, `retention_version_unverified`, with the problem:
`unsigned`, `unknown_key`, `key_not_yet_valid`, `key_compromised`, `signature_mismatch` or `chain_broken`.

Versions made before versions were signed (retention migration 0005) are signed once, late, as they are found
(`versions_sign_late`: by the first audit, or the tenant's next version, whichever comes first) and marked
`signed_late`. The migration does not sign them: it runs as the database owner, maybe without the signing
passphrase, and maybe before any key exists. The database refuses an unsigned INSERT from 0005 on, so only those
old rows can ever be signed late; what they said before 0005 installed the triggers is not attested.
"""
from __future__ import annotations

import hashlib
from datetime import UTC

import rfc8785
from django.db import transaction

from retention.models import RetentionTableVersion

PAYLOAD_TYPE = "application/vnd.forgetting-ledger.retention-table+json"
UNVERIFIED = "retention_version_unverified"


def version_statement(version: RetentionTableVersion) -> bytes:
    """What the signature covers, as bytes (RFC 8785)."""
    return rfc8785.dumps({
        "tenant_id": version.tenant_id,
        "number": version.number,
        "rules": version.rules,
        "created_at": version.created_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "previous_digest": version.previous_digest,
    })


def version_digest(version: RetentionTableVersion) -> str:
    """The link the next version's `previous_digest` holds."""
    return hashlib.sha256(version_statement(version)).hexdigest()


def _signed(version: RetentionTableVersion) -> bytes:
    from tombstones.dsse import pae

    return pae(PAYLOAD_TYPE, version_statement(version))


def _sign(version: RetentionTableVersion) -> None:
    from tombstones.models import KeyPurpose
    from tombstones.services.keys import key_current, key_private

    key = key_current(purpose=KeyPurpose.TOMBSTONE)
    version.kid = key.kid
    version.signature = key_private(key).sign(_signed(version))


def _keys() -> dict:
    from tombstones.selectors import keys_published

    return keys_published()


def signature_problem(version: RetentionTableVersion, keys: dict) -> str | None:
    """Why `version`'s signature is not to be believed (see the module's codes), or None. `keys`: the published
    keys (`tombstones.selectors.keys_published`)."""
    from tombstones.jwk import PURPOSE_TOMBSTONE

    signature = bytes(version.signature or b"")
    if not signature or not version.kid:
        return "unsigned"
    key = keys.get(version.kid)
    if key is None or key.purpose != PURPOSE_TOMBSTONE:
        return "unknown_key"
    if key.compromised_at is not None and key.compromised_at <= version.created_at:
        return "key_compromised"
    # A late signature is made after the version, by whatever key was current then.
    if not version.signed_late and key.valid_from is not None and key.valid_from > version.created_at:
        return "key_not_yet_valid"
    if not key.verify(signature, _signed(version)):
        return "signature_mismatch"
    return None


def version_sign_new(version: RetentionTableVersion) -> None:
    """Chain `version` (not saved yet; its tenant's version lock held) onto the latest version of its tenant whose
    signature verifies, and sign it."""
    versions_sign_late(tenant_id=version.tenant_id)
    keys = None
    version.previous_digest = ""
    for earlier in RetentionTableVersion.objects.filter(tenant_id=version.tenant_id).order_by("-number").iterator():
        keys = keys if keys is not None else _keys()
        if signature_problem(earlier, keys) is None:
            version.previous_digest = version_digest(earlier)
            break
    _sign(version)


def versions_sign_late(*, tenant_id: int | None = None) -> int:
    """Sign, once, the versions made before versions were signed (an empty `kid`: the database lets no version be
    inserted so since migration 0005), in number order, each chained like a new one. Returns how many."""
    pending = RetentionTableVersion.objects.filter(kid="")
    if tenant_id is not None:
        pending = pending.filter(tenant_id=tenant_id)
    tenants = sorted(set(pending.values_list("tenant_id", flat=True)))
    if not tenants:
        return 0
    from tombstones.models import KeyPurpose
    from tombstones.services.keys import key_current

    key_current(purpose=KeyPurpose.TOMBSTONE)  # created first if need be, so that the published keys hold it
    keys = _keys()
    signed = 0
    for tenant in tenants:
        with transaction.atomic():
            # Locked: two audits (or an audit and a new version) sign a tenant's old versions one after the other.
            versions = list(RetentionTableVersion.objects.filter(tenant_id=tenant).order_by("number")
                            .select_for_update())
            previous = ""
            for version in versions:
                if not version.kid:
                    version.previous_digest, version.signed_late = previous, True
                    _sign(version)
                    signed += RetentionTableVersion.objects.filter(pk=version.pk, kid="").update(
                        previous_digest=version.previous_digest, kid=version.kid, signature=version.signature,
                        signed_late=True)
                    previous = version_digest(version)
                elif signature_problem(version, keys) is None:
                    previous = version_digest(version)
    return signed


def versions_verified() -> tuple[dict[int, list[RetentionTableVersion]], list[dict]]:
    """Per tenant, its trusted versions in number order (see the module), and one anomaly per version that is not."""
    keys = _keys()
    trusted: dict[int, list[RetentionTableVersion]] = {}
    anomalies: list[dict] = []
    previous: dict[int, str] = {}
    for version in RetentionTableVersion.objects.order_by("tenant_id", "number").iterator():
        tenant_id = version.tenant_id
        trusted.setdefault(tenant_id, [])
        problem = signature_problem(version, keys)
        if problem is None:
            if version.previous_digest != previous.get(tenant_id, ""):
                problem = "chain_broken"  # a genuine version whose predecessor is gone or was never genuine
            previous[tenant_id] = version_digest(version)
        if problem is None:
            trusted[tenant_id].append(version)
        else:
            anomalies.append({"finding": UNVERIFIED, "tenant_id": tenant_id, "version": version.number,
                              "version_id": version.pk, "problem": problem,
                              "detail": "this retention table version is not trusted: the audit takes the mandates "
                                        "from the latest trusted version and the rule rows, the longer of the two"})
    return trusted, anomalies
