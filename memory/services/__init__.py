"""The memory app's writes: the store's write path and the one guarded forget."""
from memory.services.confirm import erasure_confirm
from memory.services.forget import (
    ForgetOrder,
    ForgetResult,
    forget_queryset_delete,
    records_forget,
    records_forget_many,
    records_refusals,
    records_refusals_chain,
)
from memory.services.restore import RestoreReport, archive_restore
from memory.services.scopes import scope_get, scope_get_or_create
from memory.services.targets import ForgetTarget
from memory.services.write import artifact_write, record_write, subject_get_or_create

__all__ = [
    "ForgetOrder",
    "ForgetResult",
    "ForgetTarget",
    "RestoreReport",
    "archive_restore",
    "artifact_write",
    "erasure_confirm",
    "forget_queryset_delete",
    "record_write",
    "records_forget",
    "records_forget_many",
    "records_refusals",
    "records_refusals_chain",
    "scope_get",
    "scope_get_or_create",
    "subject_get_or_create",
]
