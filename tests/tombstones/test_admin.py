"""The admin shows tombstones and keys read-only, and never a private key."""
import base64

import pytest
from django.contrib.auth.models import User

from tombstones.models import SigningKey, Tombstone

from .factories import receipt_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    user = User.objects.create_superuser("root", "root@example.org", "pw-for-tests-only")
    client.force_login(user)
    return client


@pytest.fixture
def logged():
    receipt_make()
    return Tombstone.objects.get()


def test_tombstone_pages_are_viewable_but_offer_no_add_change_or_delete(admin_client, logged):
    listing = admin_client.get("/admin/tombstones/tombstone/")
    assert listing.status_code == 200 and b"GDPR Art. 17" in listing.content
    assert b"delete_selected" not in listing.content
    detail = admin_client.get(f"/admin/tombstones/tombstone/{logged.pk}/change/")
    assert detail.status_code == 200 and b'name="_save"' not in detail.content
    assert admin_client.get("/admin/tombstones/tombstone/add/").status_code == 403
    assert admin_client.post(f"/admin/tombstones/tombstone/{logged.pk}/delete/", {"post": "yes"}).status_code == 403
    assert admin_client.post(f"/admin/tombstones/tombstone/{logged.pk}/change/", {}).status_code == 403
    assert Tombstone.objects.filter(pk=logged.pk).exists()


def test_key_pages_never_show_the_private_key(admin_client, logged):
    key = SigningKey.objects.get(purpose="tombstone")
    sealed = bytes(key.private_key_encrypted)
    for url in ("/admin/tombstones/signingkey/", f"/admin/tombstones/signingkey/{key.pk}/change/"):
        html = admin_client.get(url).content
        assert key.kid.encode() in html
        assert b"private" not in html.lower() and base64.b64encode(sealed)[:24] not in html
        assert sealed.hex()[:24].encode() not in html


def test_rotate_action_makes_a_new_key_and_keeps_the_old_one(admin_client, logged):
    old = SigningKey.objects.get(purpose="tombstone")
    response = admin_client.post("/admin/tombstones/signingkey/", {"action": "rotate", "_selected_action": [old.pk]})
    assert response.status_code == 302
    old.refresh_from_db()
    assert old.retired_at is not None
    assert SigningKey.objects.filter(purpose="tombstone", retired_at__isnull=True).exclude(pk=old.pk).exists()
