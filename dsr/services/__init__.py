"""The dsr app's writes: subject requests (`requests`), their state machine (`states`)."""
from dsr.services.requests import (request_close, request_create, request_extend, request_refuse,
                                   request_reject_identity, request_verify_identity)
from dsr.services.states import history_add, request_transition

__all__ = [
    "history_add",
    "request_close",
    "request_create",
    "request_extend",
    "request_refuse",
    "request_reject_identity",
    "request_transition",
    "request_verify_identity",
]
