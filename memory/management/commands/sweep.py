import json

from django.core.management.base import BaseCommand, CommandError

from config.errors import ApplicationError
from memory.models import SweepKind
from memory.sweeps import sweep_run_sync


class Command(BaseCommand):
    help = ("Run a sweep now, in this process (the scheduled runs go through Celery beat): compaction, "
            "pact_expiry, deferred_erasures or confirmations. --dry-run reports what it would do and changes "
            "nothing. Prints the run's counts and report.")

    def add_arguments(self, parser):
        parser.add_argument("kind", choices=SweepKind.values)
        parser.add_argument("--dry-run", action="store_true")
        parser.add_argument("--actor", default="cli")

    def handle(self, *args, **opts):
        try:
            run = sweep_run_sync(kind=opts["kind"], actor=f"cli:{opts['actor']}", dry_run=opts["dry_run"])
        except ApplicationError as exc:
            raise CommandError(json.dumps(exc.as_dict())) from exc
        if run is None:
            raise CommandError("Too many runs of this sweep are going; try later.")
        self.stdout.write(json.dumps({"run": run.pk, "kind": run.kind, "dry_run": run.dry_run, "status": run.status,
                                      "batches": run.batches, "counts": run.counts, "report": run.report},
                                     indent=2, default=str))
