import json

from django.core.management.base import BaseCommand, CommandError

from config.errors import ApplicationError
from memory.models import ForgetMode, Tenant
from memory.services import ForgetTarget, records_forget


class Command(BaseCommand):
    help = ("Forget records through the guarded path, as the API does: "
            "--record-id / --scope / --tag / --subject, --mode soft|redact|hard, --reason. Prints the JSON answer; "
            "exits 1 when anything was refused.")

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True)
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--record-id", type=int, action="append")
        target.add_argument("--scope")
        target.add_argument("--tag")
        target.add_argument("--subject", action="append")
        parser.add_argument("--mode", required=True, choices=ForgetMode.values)
        parser.add_argument("--reason", default="")
        parser.add_argument("--actor", default="cli")

    def handle(self, *args, **opts):
        tenant = Tenant.objects.filter(name=opts["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant named {opts['tenant']!r}.")
        raw = ({"record_id": opts["record_id"]} if opts["record_id"] else {"scope": opts["scope"]} if opts["scope"]
               else {"tag": opts["tag"]} if opts["tag"] else {"subject": opts["subject"]})
        try:
            result = records_forget(tenant=tenant, target=ForgetTarget.parse(raw), mode=opts["mode"],
                                    reason=opts["reason"], actor=f"cli:{opts['actor']}", path="management_command")
        except ApplicationError as exc:
            raise CommandError(json.dumps(exc.as_dict())) from exc
        self.stdout.write(json.dumps(result.as_api(), indent=2, default=str))
        if result.status != "forgotten":
            raise CommandError(f"forget {result.status}: some records were refused (see above).")
