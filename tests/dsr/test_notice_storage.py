"""How notices are stored: the receipt (~7 kB of jsonb, out of line) is compressed with lz4, which costs the
server less than half of pglz's time (migration dsr 0011), and read back intact."""
from __future__ import annotations

import json

import pytest
from django.db import connection

from dsr.models import SubjectNotice
from tests.dsr.test_workflow_steps import run_to_end
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request
from tests.factories import lz4_required

pytestmark = pytest.mark.django_db


@pytest.mark.skipif(connection.vendor != "postgresql", reason="TOAST compression is PostgreSQL's")
def test_a_notice_receipt_is_stored_with_lz4_and_read_back_intact(mailoutbox):
    lz4_required()
    # Given an erasure request run to its end: its notice carries the receipt of its two tombstones
    request = verified_request(erasure_scenario())
    run_to_end(request.pk)
    notice = SubjectNotice.objects.get(request=request)

    # Then the receipt went out of line compressed with lz4, and reads back as the mail attached it (but for the
    # salts, destroyed once sent)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_column_compression(receipt), octet_length(receipt::text) "
                       "FROM dsr_subjectnotice WHERE id = %s", [notice.pk])
        compression, size = cursor.fetchone()
    assert size > 2_000 and compression == "lz4"
    (mail,) = mailoutbox
    sent = json.loads(mail.attachments[0][1])
    assert len(notice.receipt["receipts"]) == 2 and all(r["salts"] for r in sent["receipts"])
    assert notice.receipt == {**sent, "receipts": [{k: v for k, v in r.items() if k != "salts"} for r in sent["receipts"]],
                              "salts_destroyed_at": notice.sent_at.isoformat()}
