"""The public verification form: a tombstone id, or a pasted or uploaded receipt; optionally content and salt."""
from __future__ import annotations

import re
import uuid

from django import forms

from .receipt import MAX_RECEIPT_BYTES

SALT = re.compile(r"[0-9a-fA-F]{32}")
MAX_CONTENT_CHARS = 64 * 1024


class VerifyForm(forms.Form):
    tombstone_id = forms.CharField(required=False, max_length=64, label="Tombstone id")
    receipt = forms.CharField(required=False, max_length=MAX_RECEIPT_BYTES, label="Paste a receipt",
                              widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false"}))
    receipt_file = forms.FileField(required=False, label="…or upload the receipt file")
    content = forms.CharField(required=False, strip=False, max_length=MAX_CONTENT_CHARS,
                              label="A piece of your data (optional)", widget=forms.Textarea(attrs={"rows": 3}))
    salt = forms.CharField(required=False, max_length=64, label="Its salt, from your receipt")

    def clean_tombstone_id(self) -> str:
        value = self.cleaned_data["tombstone_id"].strip()
        if value:
            try:
                uuid.UUID(value)
            except ValueError:
                raise forms.ValidationError("A tombstone id looks like 0b5e…-…: 32 hex digits with dashes.") from None
        return value

    def clean_salt(self) -> str:
        value = self.cleaned_data["salt"].strip()
        if value and not SALT.fullmatch(value):
            raise forms.ValidationError("A salt is the 32 hexadecimal characters shown in your receipt.")
        return value

    def clean_receipt_file(self):
        upload = self.cleaned_data["receipt_file"]
        if upload and upload.size > MAX_RECEIPT_BYTES:
            raise forms.ValidationError("This file is larger than a receipt can be.")
        return upload

    def clean(self):
        data = super().clean()
        sources = [bool(data.get("tombstone_id")), bool(data.get("receipt")), bool(data.get("receipt_file"))]
        if not self.errors and sum(sources) != 1:
            raise forms.ValidationError("Give one thing to check: a tombstone id, a pasted receipt, or a receipt file.")
        if data.get("salt") and not data.get("content"):
            self.add_error("content", "Give the piece of data that the salt goes with.")
        return data

    def document(self) -> str | None:
        """The receipt text, pasted or uploaded (None for a lookup by id); undecodable bytes read as a non-receipt."""
        upload = self.cleaned_data.get("receipt_file")
        if upload:
            return upload.read(MAX_RECEIPT_BYTES + 1).decode("utf-8", errors="replace")
        return self.cleaned_data.get("receipt") or None
