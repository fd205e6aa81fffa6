"""`{% alerts_open_count as n %}`: how many alerts are open and not acknowledged, for the banner on every admin
page (alerts/_banner.html), shown to users who may view alerts. One COUNT on a partial index of a handful of
rows; none at all for a user without the permission (whose permissions the admin's sidebar loaded already)."""
from django import template

from alerts.models import Alert

register = template.Library()


@register.simple_tag(takes_context=True)
def alerts_open_count(context) -> int:
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_active or not user.is_staff or not user.has_perm("alerts.view_alert"):
        return 0
    return Alert.objects.filter(resolved_at__isnull=True, acknowledged_at__isnull=True).count()
