"""`manage.py db_grant_app_role ROLE [--create] [--password PW]`: give the application role row access and no
more (memory/dbroles.py). Run it as the owner role (the one that ran `migrate`), after every `migrate`."""
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction

from memory.dbroles import RoleError, app_role_create, app_role_grant


class Command(BaseCommand):
    help = "Grant the application database role row access and nothing more (PostgreSQL; run as the owner)."

    def add_arguments(self, parser):
        parser.add_argument("role", help="the role the service connects as")
        parser.add_argument("--create", action="store_true", help="create the role (LOGIN) if it does not exist")
        parser.add_argument("--password", help="with --create: the new role's password")

    def handle(self, *args, role, create, password, **options):
        if connection.vendor != "postgresql":
            raise CommandError("database roles exist on PostgreSQL only (the embedded SQLite default has one user)")
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                if create and app_role_create(cursor, role=role, password=password):
                    self.stdout.write(f"created role {role}")
                for statement in app_role_grant(cursor, role=role):
                    self.stdout.write(statement)
        except RoleError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(self.style.SUCCESS(f"{role} may read and write rows; the lock and the guard are the owner's"))
