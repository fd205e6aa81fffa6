"""The public verification page, `/verify/`: no login, works without JavaScript, rate-limited.

The server verifies and says why in plain words; the page then hands the same receipt (never the
salts or the content) to `verify.js`, which checks it again in the browser against the published keys.
"""
from __future__ import annotations

import functools
from pathlib import Path

from django.conf import settings
from django.shortcuts import render
from django.http import HttpResponse
from django.template.loader import get_template
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods

from .errors import TombstoneError
from .forms import VerifyForm
from .plain import tombstone_words
from .ratelimit import rate_limit_check
from .receipt import is_bundle, json_parse
from .services import receipt_build, receipt_complete, tombstone_verify
from .verification import GENUINE_MESSAGE, REASONS

CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self' "
                           "'unsafe-inline'; img-src 'self' data:; form-action 'self'; base-uri 'none'; "
                           "frame-ancestors 'none'")


def _public_part(document) -> dict | None:
    """What the browser needs to check the receipt (or each receipt of a bundle) again: without the salts."""
    if isinstance(document, str):
        try:
            document = json_parse(document)
        except ValueError:
            return None
    if not isinstance(document, dict):
        return None
    if is_bundle(document) and isinstance(document.get("receipts"), list):
        return {**document, "receipts": [_public_part(item) if isinstance(item, dict) else item
                                         for item in document["receipts"]]}
    return {key: value for key, value in document.items() if key != "salts"}


# The footer's command, word by word: the page keeps each word on one line (a narrow screen wraps between them).
OFFLINE_COMMAND = ("python", "-m", "tombstones.verify", "receipt-request-N.json", "tombstone-keys.json")


def _page(request, context: dict, status: int = 200) -> HttpResponse:
    context = {"reasons": {**REASONS, "genuine": GENUINE_MESSAGE}, "offline_command": OFFLINE_COMMAND, **context}
    response = render(request, "tombstones/verify.html", context, status=status)
    response["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response["Referrer-Policy"] = "same-origin"  # "no-referrer" makes the form post Origin: null, which CSRF refuses
    response["Cache-Control"] = "no-store"
    return response


@require_http_methods(["GET", "POST"])
def verify_page(request):
    if request.method == "GET" and "id" not in request.GET:
        return _page(request, {"form": VerifyForm()})
    form = VerifyForm({"tombstone_id": request.GET["id"]}) if request.method == "GET" else VerifyForm(
        request.POST, request.FILES)
    try:
        rate_limit_check(request=request, bucket="page", limit=settings.LEDGER_VERIFY_RATE_LIMIT)
    except TombstoneError as exc:
        return _page(request, {"form": form, "error": exc, "pasted": request.POST.get("receipt", "")},
                     status=exc.status_code)
    if not form.is_valid():
        return _page(request, {"form": form, "pasted": form.data.get("receipt", "")}, status=400)
    document = form.document()
    try:
        if document is None:
            document = receipt_build(tombstone_id=form.cleaned_data["tombstone_id"], include_salts=False)
    except TombstoneError as exc:  # tombstone_not_found
        return _page(request, {"form": form, "error": exc}, status=exc.status_code)
    document = receipt_complete(document=document)  # a bare envelope gets its proof, for the browser too
    report = tombstone_verify(document=document, content=form.cleaned_data.get("content") or None,
                              salt=form.cleaned_data.get("salt") or None)
    context = {"form": form, "report": report, "bundle": _public_part(document),
               # What each tombstone says, in words (a bundle's receipts each have one), once all are genuine.
               "tombstones": [tombstone_words(r.summary) for r in (report.items or [report]) if r.summary]
               if report.genuine else [],
               # A pasted receipt that failed stays in the box, to be corrected; a genuine one is not shown back
               # (it holds the subject's salts, and the page shows nothing personal).
               "pasted": form.cleaned_data.get("receipt", "") if not report.genuine else ""}
    return _page(request, context, status=400 if report.code == "malformed" else 200)


SPEC_PATH = Path(settings.BASE_DIR) / "docs" / "verification-spec.md"


@functools.cache
def _spec_html() -> str:
    """docs/verification-spec.md as HTML, rendered once a process: the file in the repository is the spec."""
    import markdown

    return markdown.markdown(SPEC_PATH.read_text(encoding="utf-8"), extensions=["tables", "fenced_code", "toc"],
                             output_format="html")


@require_http_methods(["GET", "HEAD"])
def verify_spec(request):
    """The verification specification, for anyone writing their own verifier (no login, no JavaScript)."""
    response = render(request, "tombstones/spec.html", {"spec": mark_safe(_spec_html())})  # our own file
    response["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response["Cache-Control"] = "public, max-age=300"
    return response


def verify_script(request):
    """The page's verifier, served from here so the page needs no static-files setup and no CDN."""
    source = get_template("tombstones/verify.js").template.source  # served as written, not rendered
    response = HttpResponse(source, content_type="text/javascript; charset=utf-8")
    response["Cache-Control"] = "public, max-age=300"
    return response
