"""`{% audit_alerts as alerts %}`: the coverage audit's alerts (retention.audit.audit_alerts) for a template,
so that templates/admin/_audit_banner.html is self-contained wherever it is included."""
from django import template

from retention.audit import audit_alerts as _audit_alerts

register = template.Library()


@register.simple_tag
def audit_alerts() -> list[dict]:
    return _audit_alerts()
