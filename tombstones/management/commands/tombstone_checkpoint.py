"""`manage.py tombstone_checkpoint`: sign a checkpoint of the log now (also the Celery task
`tombstones.checkpoint_sign`), so that recent tombstones get a checkpoint that dates them."""
from django.core.management.base import BaseCommand

from tombstones.services import checkpoint_sign


class Command(BaseCommand):
    help = "Sign a checkpoint of the tombstone log if it grew since the last one, and print it."

    def handle(self, *args, **options):
        self.stdout.write(checkpoint_sign().note, ending="")
