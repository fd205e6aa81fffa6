"""The tombstones app's writes. Other apps call `tombstone_issue` (inside a forget's transaction, before
its first destructive statement) and `receipt_build` (for the data subject)."""
from .issue import IssuedTombstone, TombstoneRequest, tombstone_issue, tombstones_issue_many
from .keys import key_current, key_mark_compromised, key_rotate, keys_ensure, passphrase_get
from .log import checkpoint_sign, log_append, log_lock
from .receipts import receipt_build, receipt_complete, receipts_build, salts_destroy, tombstone_verify

__all__ = [
    "IssuedTombstone",
    "TombstoneRequest",
    "checkpoint_sign",
    "key_current",
    "key_mark_compromised",
    "key_rotate",
    "keys_ensure",
    "log_append",
    "log_lock",
    "passphrase_get",
    "receipt_build",
    "receipt_complete",
    "receipts_build",
    "salts_destroy",
    "tombstone_issue",
    "tombstone_verify",
    "tombstones_issue_many",
]
