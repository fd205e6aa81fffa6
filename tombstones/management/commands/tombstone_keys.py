"""`manage.py tombstone_keys list | rotate --purpose P | compromised --kid KID [--at TIME]`."""
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from tombstones.errors import TombstoneError
from tombstones.jwk import parse_time
from tombstones.models import KeyPurpose, SigningKey
from tombstones.services import key_mark_compromised, key_rotate


class Command(BaseCommand):
    help = "List, rotate, or mark compromised the tombstone and checkpoint signing keys."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list")
        rotate = sub.add_parser("rotate")
        rotate.add_argument("--purpose", choices=KeyPurpose.values, required=True)
        compromised = sub.add_parser("compromised")
        compromised.add_argument("--kid", required=True)
        compromised.add_argument("--at", help="RFC 3339 time of the compromise (default: now)")
        parser.add_argument("--actor", default="cli")

    def handle(self, *args, action, actor, **options):
        try:
            if action == "rotate":
                key = key_rotate(purpose=options["purpose"], actor=actor)
                self.stdout.write(f"new {key.purpose} key {key.kid}")
            elif action == "compromised":
                at = parse_time(options["at"]) if options["at"] else timezone.now()
                key = key_mark_compromised(kid=options["kid"], compromised_at=at, actor=actor)
                self.stdout.write(f"{key.kid} compromised at {key.compromised_at.isoformat()}")
        except (TombstoneError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        if action == "list":
            for key in SigningKey.objects.order_by("created_at"):
                state = "compromised" if key.compromised_at else "retired" if key.retired_at else "current"
                self.stdout.write(f"{key.purpose:10} {key.kid} {state} since {key.created_at.isoformat()}")
