from django.core.management.base import BaseCommand, CommandError

from config.errors import ApplicationError
from memory.models import ApiToken
from memory.services.tokens import token_issue


class Command(BaseCommand):
    help = "Create an API token for a tenant (created if needed) and role; prints the token on its own line."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--role", required=True, choices=ApiToken.Role.values)

    def handle(self, *args, tenant, role, **options):
        try:
            _, key = token_issue(tenant_name=tenant, role=role)
        except ApplicationError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(key)
