"""Outside a transaction (as in production), an export is read in one read-only REPEATABLE READ transaction, and
a download cut short (the client went away: the server closes the response) ends it."""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit_exports import selectors, writers
from tests.admin.conftest import requests_bulk

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_export_is_one_snapshot_and_a_cut_short_download_leaves_no_transaction_open(token_for, monkeypatch):
    auditor = token_for("bulk", "auditor")
    requests_bulk(30, tenant_name="bulk", items_each=2)
    monkeypatch.setattr(selectors, "CHUNK", 5)
    monkeypatch.setattr(writers, "PIECE_BYTES", 200)
    assert not connection.in_atomic_block

    with CaptureQueriesContext(connection) as captured:
        response = auditor.get("/api/v1/audit/exports/requests.json")
        pieces = iter(response.streaming_content)
        next(pieces)
        assert connection.in_atomic_block  # the rows are being read in the export's transaction
        response.close()
    assert not connection.in_atomic_block
    assert any("REPEATABLE READ READ ONLY" in q["sql"] for q in captured.captured_queries)

    # And a whole download ends it too.
    whole = auditor.get("/api/v1/audit/exports/requests.csv")
    assert len(b"".join(whole.streaming_content).splitlines()) == 31
    whole.close()
    assert not connection.in_atomic_block
