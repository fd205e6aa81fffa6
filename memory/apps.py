from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _app_role_regrant(using: str = "default", **kwargs) -> None:
    """After `migrate`, give the application role (LEDGER_DB_APP_ROLE) its rights on the new tables too."""
    from django.conf import settings
    from django.db import connections

    from memory.dbroles import app_role_grant

    role = getattr(settings, "LEDGER_DB_APP_ROLE", "")
    connection = connections[using]
    if role and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            app_role_grant(cursor, role=role)


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory store"

    def ready(self) -> None:
        from memory import checks, lookups  # noqa: F401  (register the checks, the `any_of` lookup)

        post_migrate.connect(_app_role_regrant, sender=self, dispatch_uid="memory.app_role_regrant")
