"""The tombstones app's error. Stable codes (see README.md):

- `statement_invalid` (400): the statement given to `tombstone_issue` is outside the statement schema
  (floats, large integers, content, unknown or missing fields); `extra.field` says where.
- `salts_invalid` (400): a subject salt is not 32 hex characters or names a record the statement lacks.
- `tombstone_conflict` (409): a tombstone with this id exists with another statement.
- `tenant_not_found` (400): a tombstone to issue names a tenant that does not exist; nothing is stored.
- `tombstone_not_found` (404), `key_not_found` (404).
- `salts_destroyed` (410): a receipt with salts was asked for a tombstone whose salts are no longer kept
  (the subject's notice carried them, then they were destroyed; or no subject request asked for the forget).
- `invalid_parameter` (400): a query parameter is missing or not what it should be; `extra.parameter`.
- `tree_size_out_of_range` (400): a proof was asked for a tree the log has not reached.
- `signing_key_unavailable` (503): the private key cannot be decrypted (wrong `LEDGER_SIGNING_PASSPHRASE`).
- `rate_limited` (429): too many verification requests from one address; `extra.retry_after` seconds.
"""
from config.errors import ApplicationError


class TombstoneError(ApplicationError):
    code = "tombstone_error"
