"""The DRP settings, read from Django settings or the environment (development defaults need none).

- `LEDGER_DRP_BUSINESS_ID`: this service's id in the DRP service directory (`[A-Z0-9_]+`); the default
  `business-id` an agent's signed requests must name. An agent registered with its own `business_id`
  (a tenant known to the directory under another id) overrides it.
- `LEDGER_DRP_BUSINESS_NAME`: the name in the discovery document.
"""
from __future__ import annotations

import os

from django.conf import settings

# The protocol versions whose requests this service accepts: 1.0 changed nothing in the spec since 0.9.4.
DRP_VERSION = "0.9.4"
ACCEPTED_VERSIONS = ("0.9.4", "1.0")


def _setting(name: str, default: str) -> str:
    return getattr(settings, name, None) or os.environ.get(name) or default


def business_id() -> str:
    return _setting("LEDGER_DRP_BUSINESS_ID", "FORGETTING_LEDGER")


def business_name() -> str:
    return _setting("LEDGER_DRP_BUSINESS_NAME", "Forgetting Ledger")
