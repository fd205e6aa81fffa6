"""`manage.py tombstone_verify RECEIPT KEYS.json`: the offline verifier (`python -m tombstones.verify`)."""
import argparse

from django.core.management.base import BaseCommand

from tombstones import verify


class Command(BaseCommand):
    help = "Verify a tombstone receipt against a saved key set, without the database or the network."
    requires_system_checks: list = []

    def add_arguments(self, parser):
        verify.add_arguments(parser)

    def handle(self, *args, **options):
        names = ("receipt", "keys", "other_checkpoint", "consistency_proof", "content_file", "salt", "json")
        code = verify.run(argparse.Namespace(**{name: options[name] for name in names}), out=self.stdout)
        if code != verify.EXIT_OK:
            raise SystemExit(code)
