from django.apps import AppConfig


class DsrConfig(AppConfig):
    name = "dsr"
    verbose_name = "Subject requests"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from dsr.roles import roles_complete

        # Every role reads the admin screens of the ledger's apps, including ones added after the roles were
        # made (dsr/roles.py).
        post_migrate.connect(roles_complete, dispatch_uid="dsr.roles_complete")

        # The conflicts admin registers itself on import; it imports dsr.admin (for shared pieces), never the
        # other way round, so it is imported here rather than from dsr/admin.py.
        from dsr import admin_conflicts  # noqa: F401
