"""Signed tombstones, the tombstone log and their verification.

Keep this package's `__init__` free of Django imports: the offline verifier (`python -m tombstones.verify`)
imports the pure modules (`canonical`, `dsse`, `merkle`, `note`, `jwk`, `receipt`, `verification`) without a
configured Django.
"""
