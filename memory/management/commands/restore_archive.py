from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from memory.models import Tenant
from memory.services.restore import archive_restore


class Command(BaseCommand):
    help = ("Restore records from an archive file (JSON lines: id, scope, subject, content_class, content, "
            "created_at, and optionally tier, tags, commitment) into a tenant. The deletion log is replayed first: "
            "nothing forgotten comes back; every skipped line is printed with the reason. Restored records get "
            "new ids (tagged restored:<archive id>); see memory/services/restore.py.")

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--dry-run", action="store_true", help="say what would be restored; write nothing")

    def handle(self, *args, **opts):
        tenant = Tenant.objects.filter(name=opts["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant named {opts['tenant']!r}.")
        if not opts["file"].is_file():
            raise CommandError(f"No such file: {opts['file']}")
        with opts["file"].open(encoding="utf-8") as lines:
            report = archive_restore(tenant=tenant, lines=lines, dry_run=opts["dry_run"])
        for skipped in report.skipped:
            self.stdout.write(f"skipped line {skipped['line']} (record {skipped['archive_id']}): "
                              f"{skipped['reason']}: {skipped['detail']}")
        verb = "would restore" if opts["dry_run"] else "restored"
        for item in report.restored:
            self.stdout.write(f"{verb} record {item['archive_id']}"
                              + (f" as record {item['record_id']}" if item["record_id"] else ""))
        forgotten = sum(1 for s in report.skipped if s["reason"] == "forgotten")
        self.stdout.write(f"{verb} {len(report.restored)} records; skipped {len(report.skipped)} "
                          f"({forgotten} forgotten)")
