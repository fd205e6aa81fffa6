"""Shared pieces of the admin's custom pages (dsr, retention): render a page inside the admin, and the
one shape of every act (django.contrib.auth's `user_change_password`): check the permission, parse a
form, call one service, `log_change()`, say what happened, redirect. A service's refusal is shown as it
was given (its detail and code) on the form it came from, and nothing is logged.
"""
from __future__ import annotations

from typing import Any, Callable

from django.contrib import messages
from django.contrib.admin import ModelAdmin
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from config.errors import ApplicationError

FORM_TEMPLATE = "admin/ledger/form_page.html"


def page_render(model_admin: ModelAdmin, request: HttpRequest, template: str, *, title: str,
                obj: models.Model | None = None, **context: Any) -> TemplateResponse:
    """A page of `model_admin` with the admin's chrome (header, breadcrumbs, sidebar, messages)."""
    opts = model_admin.model._meta
    return TemplateResponse(request, template, {
        **model_admin.admin_site.each_context(request),
        "opts": opts,
        "app_label": opts.app_label,
        "title": title,
        "subtitle": None,
        "original": obj,
        "object": obj,
        "has_view_permission": model_admin.has_view_permission(request, obj),
        "has_change_permission": model_admin.has_change_permission(request, obj),
        "media": model_admin.media,
        **context,
    })


def refusal_text(exc: ApplicationError) -> str:
    return f"Refused: {exc.detail} ({exc.code})"


def act_page(
    model_admin: ModelAdmin,
    request: HttpRequest,
    *,
    allowed: bool,
    form_class,
    title: str,
    act: Callable[[Any], tuple[models.Model, str]],
    done_url: Callable[[models.Model], str],
    obj: models.Model | None = None,
    form_kwargs: dict | None = None,
    intro: str = "",
    submit: str = "Confirm",
    added: bool = False,
    template: str = FORM_TEMPLATE,
    **context: Any,
) -> HttpResponse:
    """GET: the form. POST: a valid form is handed to `act`, which calls one service and returns the object
    acted on and what happened; that is logged (`log_change`, or `log_addition` when `added`), said, and
    the browser goes to `done_url(obj)`. A service refusal is shown on the form, nothing logged."""
    if not allowed:
        raise PermissionDenied
    form_kwargs = form_kwargs or {}
    if request.method == "POST":
        form = form_class(request.POST, **form_kwargs)
        if form.is_valid():
            try:
                acted, message = act(form)
            except ApplicationError as exc:
                messages.error(request, refusal_text(exc))
            else:
                if added:
                    model_admin.log_addition(request, acted, message)
                else:
                    model_admin.log_change(request, acted, message)
                messages.success(request, message)
                return HttpResponseRedirect(done_url(acted))
    else:
        form = form_class(**form_kwargs)
    return page_render(model_admin, request, template, title=title, obj=obj, form=form, intro=intro,
                       submit=submit, **context)


class ReadOnlyMixin:
    """Histories, logs and tombstones: viewable by every ledger role, changed by nobody through the admin."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(ReadOnlyMixin, ModelAdmin):
    pass
