"""What the subject receives is unchanged by the notify step's cheaper making: the receipt attachment is
byte for byte `json.dumps(receipt, indent=2)`, and the notice's text is what model instances would give."""
import json

import pytest
from django.utils import timezone

from dsr.models import RequestItem, SubjectNotice
from dsr.services import notify
from tests.dsr.test_workflow_steps import run_to_end
from tests.dsr.workflow_fixtures import erasure_scenario, verified_request
from tombstones.services import receipts_build

# Every character class json's ASCII escaping treats apart: controls (short and \u00XX forms), quote,
# backslash, slash, DEL, Latin-1, the BMP past it (line separators, BOM, the checkpoint's em dash) and
# characters past the BMP (a surrogate pair each, lowercase hex).
AWKWARD = ("".join(chr(c) for c in range(0x00, 0x100)) + "\u2014\u2028\u2029\ufeff\uffff"
           + "\U00010000\U0001F600\U0010FFFF" + ' "quoted" back\\slash /path')


@pytest.mark.parametrize("receipt", [
    {"request": 1, "receipts": []},
    {"request": 2, "receipts": [{"format": "x/v1", "salts": {}, "inclusion": {"leaf_index": 0, "tree_size": 1,
                                                                              "hashes": []}}]},
    {"request": 3, "receipts": [{AWKWARD: [AWKWARD, {}, [], None, True, False, 0, -7, 2 ** 63 - 1],
                                 "checkpoint": "origin\n12\nhash=\n\n\u2014 origin sig=\n"}]},
    {"request": 4, "receipts": [{"salts": {str(k): "ab" * 16 for k in range(300)}}]},
    # Only the checkpoints' em dashes past ASCII (the replace alone), and with a DEL or a Latin-1 letter too.
    {"request": 5, "receipts": [{"checkpoint": "origin\n12\nhash=\n\n\u2014 origin sig=\n"}] * 2},
    {"request": 6, "receipts": [{"checkpoint": "\u2014 origin sig=\n", "note": "del\x7f"}]},
    {"request": 7, "receipts": [{"checkpoint": "\u2014 origin sig=\n", "note": "caf\u00e9 \u2014"}]},
])
def test_receipt_attachment_is_the_text_json_dumps_writes(receipt):
    assert notify.receipt_text(receipt) == json.dumps(receipt, indent=2)


def test_what_orjson_refuses_or_would_write_differently_goes_through_json():
    export = {"request": 5, "export": {"records": [{"score": 1e16, "content": "caf\u00e9"}]}}
    assert notify.receipt_text(export) == json.dumps(export, indent=2)  # orjson writes 1e16 as "1e16"
    int_keys = {"request": 6, "receipts": [{1: "a"}]}
    assert notify.receipt_text(int_keys) == json.dumps(int_keys, indent=2)
    assert notify.receipt_text(None) == "null"


@pytest.mark.django_db
def test_the_mail_carries_the_receipts_as_json_dumps_wrote_them_and_the_notice_text_of_model_items(mailoutbox):
    scenario = erasure_scenario()
    request = verified_request(scenario)

    run_to_end(request.pk)

    request.refresh_from_db()
    (mail,) = mailoutbox
    notice = SubjectNotice.objects.get(request=request)
    items = list(RequestItem.objects.filter(request=request).order_by("pk"))
    tombstones = sorted({str(i.tombstone_id) for i in items if i.tombstone_id})
    # The checkpoint the notice's receipts were proven against; the salts were destroyed once the mail was sent.
    receipts = receipts_build(tombstone_ids=tombstones, include_salts=False)
    expected = {"format": "forgetting-ledger-receipts/v1", "request": request.pk,
                "receipts": [receipts[t] for t in tombstones]}
    assert len(tombstones) == 2 and "\u2014" in expected["receipts"][0]["checkpoint"]
    (name, text, mimetype), = mail.attachments
    assert (name, mimetype) == (f"receipt-request-{request.pk}.json", "application/json")
    sent = json.loads(text)
    assert text == json.dumps(sent, indent=2)
    salts = [r.pop("salts") for r in sent["receipts"]]
    assert sent == expected and all(salts)
    assert notice.receipt == {**expected, "salts_destroyed_at": notice.sent_at.isoformat()}
    recomposed = notify._notice_compose(request, items, earlier=0, sent_at=notice.sent_at, receipts=receipts,
                                        recipients=notify._recipients({request.pk: items}))
    assert (recomposed.subject_line, recomposed.body, recomposed.to) == (notice.subject_line, notice.body, notice.to)
    assert mail.body == notice.body and "supervisory authority" in mail.body


@pytest.mark.django_db
def test_notices_stored_by_the_written_out_insert_read_back_as_bulk_create_stores_them():
    scenario = erasure_scenario()
    requests = [verified_request(scenario), verified_request(scenario, subject="subject-8")]
    receipts = [{"request": 1, "receipts": [{"checkpoint": "\u2014 caf\u00e9 \U0001F600", "salts": {}}]},
                {"request": 2, "receipts": [{7: "an int key: orjson refuses it, json writes it as \"7\""}]},
                None]
    sent_at = timezone.now()

    def notices(kind):
        return [SubjectNotice(request=request, kind=f"{kind}-{n}", to="subject@example.org", subject_line="s \u00e9",
                              body=f"body {n}\n\u2014", receipt=receipt, sent_at=sent_at)
                for request in requests for n, receipt in enumerate(receipts)]

    notify._notices_store(notices("written"))
    SubjectNotice.objects.bulk_create(notices("orm"))

    fields = ("request_id", "to", "subject_line", "body", "receipt", "sent_at")
    stored = {(n.request_id, n.kind): n for n in SubjectNotice.objects.filter(request__in=requests)}
    assert len(stored) == 2 * len(requests) * len(receipts)
    for request in requests:
        for n in range(len(receipts)):
            written, orm = stored[request.pk, f"written-{n}"], stored[request.pk, f"orm-{n}"]
            assert [getattr(written, f) for f in fields] == [getattr(orm, f) for f in fields]
            assert written.created_at is not None
    assert SubjectNotice.objects.filter(request__in=requests, kind__startswith="written", receipt__isnull=True).count() == 2
    assert SubjectNotice.objects.get(request=requests[0], kind="written-1").receipt == {
        "request": 2, "receipts": [{"7": "an int key: orjson refuses it, json writes it as \"7\""}]}
