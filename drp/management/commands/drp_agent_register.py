from django.core.management.base import BaseCommand, CommandError

from config.errors import ApplicationError
from drp.services import agent_register
from memory.services.tokens import tenant_get_or_create


class Command(BaseCommand):
    help = ("Register an authorized agent (DRP) for a tenant, created if needed, or re-key one: prints its bearer "
            "token on its own line, once (only its hash is kept).")

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--agent-id", required=True, help="The agent's id in the DRP service directory.")
        parser.add_argument("--verify-key", required=True, help="The agent's base64 Ed25519 public key.")
        parser.add_argument("--business-id", default="", help="The business-id its requests name "
                            "(default: LEDGER_DRP_BUSINESS_ID).")
        parser.add_argument("--name", default="")

    def handle(self, *args, tenant, agent_id, verify_key, business_id, name, **options):
        try:
            _, key = agent_register(tenant=tenant_get_or_create(name=tenant), agent_id=agent_id,
                                    verify_key=verify_key, business_id=business_id, name=name,
                                    actor="command:drp_agent_register")
        except ApplicationError as exc:
            raise CommandError(f"{exc.code}: {exc.detail}") from exc
        self.stdout.write(key)
