"""The admin login's rate limit (django-axes, configured in config/settings.py): the failed attempts behind a
lockout, and the log of logins. Superusers only: no role's group holds these permissions (dsr/roles.py).

Deleting an attempt lifts the lockout it causes, as `manage.py axes_reset_username NAME` and
`manage.py axes_reset_ip ADDRESS` do. The log of logins is read-only, as every history is here.
"""
from axes.admin import AccessAttemptAdmin, AccessLogAdmin
from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_client_username, get_cool_off, get_failure_limit
from axes.models import AccessAttempt, AccessLog
from django.conf import settings
from django.contrib import admin
from django.shortcuts import render

from config.admin_pages import ReadOnlyMixin


@admin.register(AccessAttempt)
class LoginAttemptAdmin(AccessAttemptAdmin):
    show_full_result_count = False

    @admin.action(description="Clean up expired attempts")
    def cleanup_expired_attempts(self, request, queryset):
        # axes' action measures the cool-off from the request's attempt time, which axes sets only on the requests
        # it watches (a login): on the changelist's POST it was missing, and the action answered 500.
        AxesProxyHandler.update_request(request)
        return super().cleanup_expired_attempts(request, queryset)


@admin.register(AccessLog)
class LoginLogAdmin(ReadOnlyMixin, AccessLogAdmin):
    show_full_result_count = False


def login_locked(request, original_response=None, credentials=None):
    """The lockout page (AXES_LOCKOUT_CALLABLE), in the admin's own frame: what axes would render from
    AXES_LOCKOUT_TEMPLATE, with the admin site's context (its header and title) added."""
    return render(request, "admin/ledger/login_locked.html", {
        **admin.site.each_context(request),
        "title": "Too many failed logins",
        "failure_limit": get_failure_limit(request, credentials),
        "username": get_client_username(request, credentials) or "",
        "cooloff_timedelta": get_cool_off(request),
    }, status=settings.AXES_HTTP_RESPONSE_CODE)
