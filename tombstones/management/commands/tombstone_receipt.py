"""`manage.py tombstone_receipt TOMBSTONE_ID`: print the receipt a data subject keeps (JSON)."""
import json

from django.core.management.base import BaseCommand, CommandError

from tombstones.errors import TombstoneError
from tombstones.services import receipt_build


class Command(BaseCommand):
    help = "Print a tombstone's receipt (envelope, inclusion proof, checkpoint, the subject's salts)."

    def add_arguments(self, parser):
        parser.add_argument("tombstone_id")
        parser.add_argument("--without-salts", action="store_true")

    def handle(self, *args, tombstone_id, without_salts, **options):
        try:
            receipt = receipt_build(tombstone_id=tombstone_id, include_salts=not without_salts)
        except TombstoneError as exc:
            raise CommandError(exc.detail) from None
        self.stdout.write(json.dumps(receipt, indent=2))
