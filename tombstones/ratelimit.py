"""A fixed-window request counter per client address, in Django's cache (shared by web processes when the
cache is shared: set CACHE_URL to Redis in production)."""
from __future__ import annotations

import time

from django.conf import settings
from django.core.cache import cache

from .errors import TombstoneError


def rate_limit_check(*, request, bucket: str, limit: int) -> None:
    """Count this request; raise `rate_limited` (429) when the address is over `limit` in this window."""
    window = settings.LEDGER_VERIFY_RATE_WINDOW
    now = time.time()
    address = request.META.get("REMOTE_ADDR") or "unknown"
    key = f"tombstones:rate:{bucket}:{address}:{int(now // window)}"
    cache.add(key, 0, timeout=window + 1)
    try:
        count = cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=window + 1)
        count = 1
    if count > limit:
        retry_after = max(1, int(window - now % window))
        raise TombstoneError("rate_limited", f"Too many verification requests from your address: at most {limit} "
                             f"every {window} seconds. Try again in {retry_after} seconds.",
                             {"retry_after": retry_after}, status_code=429)
