"""What the agent's session must have left in storage, whichever transport carried it."""
from __future__ import annotations

from memory.models import ForgetEvent, Record
from tombstones.models import Tombstone


def assert_stored(ids: dict, *, globex_record_id: int) -> None:
    note, trade = Record.objects.get(pk=ids["note"]), Record.objects.get(pk=ids["trade"])
    assert note.forgotten_at is not None and note.redacted_at is not None and note.content != "Alice prefers oat milk"
    assert note.erasure_pending is False  # the redact was confirmed
    assert trade.forgotten_at is None and trade.content == "Alice bought 10 ACME at 12.5"  # the refusal kept it
    theirs = Record.objects.get(pk=globex_record_id)
    assert theirs.forgotten_at is None and theirs.content == "globex secret plans"
    event = ForgetEvent.objects.get(pk=ids["handle"]["sequence"])
    assert event.path == "mcp" and event.mode == "soft" and event.confirmed_at is None
    redact = ForgetEvent.objects.get(pk=ids["redact_handle"]["sequence"])
    assert redact.path == "mcp" and redact.mode == "redact" and redact.confirmed_at is not None
    assert event.actor.startswith("token:")
    refusal = ForgetEvent.objects.filter(tenant=note.tenant, status="refused").get()
    assert refusal.path == "mcp" and refusal.reason == "user asked"
    assert Tombstone.objects.filter(pk=ids["handle"]["tombstone_id"]).exists()
