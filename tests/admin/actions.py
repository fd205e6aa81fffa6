"""Running an admin action as a browser does, and the register of which actions have a test
(tests/admin/test_actions.py checks it against every registered admin)."""
from __future__ import annotations

from django.contrib import admin
from django.test import RequestFactory
from django.urls import reverse

COVERED: set[tuple[str, str]] = set()


def covers(*pairs: tuple[str, str]):
    """Marks a test as the one for these (model label, action name) pairs."""
    COVERED.update(pairs)
    return lambda test: test


def changelist(model) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def act(client, model, action: str, ids, *, confirm: bool = False, **extra):
    """POST the action as the changelist's form does; with `confirm`, answer its confirmation page as its
    "Yes, I'm sure" button does. Returns the last answer, redirects followed."""
    data = {"action": action, "_selected_action": [str(pk) for pk in ids], "index": "0", **extra}
    response = client.post(changelist(model), data)
    assert response.status_code < 500, (model, action, response.status_code)
    if confirm:
        assert response.status_code == 200 and b'name="post"' in response.content, (model, action)
        response = client.post(changelist(model), {**data, "post": "yes"})
        assert response.status_code < 500, (model, action, response.status_code)
    if response.status_code == 302:
        response = client.get(response["Location"])
        assert response.status_code < 500
    return response


def said(response) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []


def offered(model, user) -> set[str]:
    request = RequestFactory().get(changelist(model))
    request.user = user
    return set(admin.site._registry[model].get_actions(request))
