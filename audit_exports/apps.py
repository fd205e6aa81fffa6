from django.apps import AppConfig


class AuditExportsConfig(AppConfig):
    name = "audit_exports"
    verbose_name = "Audit exports"
    default_auto_field = "django.db.models.BigAutoField"
