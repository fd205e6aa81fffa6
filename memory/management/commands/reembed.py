import dataclasses
import json

from django.core.management.base import BaseCommand, CommandError

from memory.embedding import embedder_identity
from memory.services.reembed import BATCH, MAX_BATCH, embeddings_stale, reembed


class Command(BaseCommand):
    help = ("Make the store's vectors again with the configured embedder (LEDGER_EMBEDDER), after it has changed: "
            "until then, the similarity search passes over the vectors of the other one. Every live embedding "
            "another embedder made, in batches; it can stop anywhere and run again. Forgotten and redacted "
            "embeddings are neither read nor written. --dry-run counts them and changes nothing. --rebuild-index "
            "(PostgreSQL): the similarity index dropped first and built again at the end, far faster for a whole "
            "store; the search is exact, without it, meanwhile.")

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=BATCH, help=f"1 to {MAX_BATCH} (default {BATCH})")
        parser.add_argument("--dry-run", action="store_true")
        parser.add_argument("--rebuild-index", action="store_true")

    def handle(self, *args, **opts):
        if not 1 <= opts["batch_size"] <= MAX_BATCH:
            raise CommandError(f"--batch-size must be from 1 to {MAX_BATCH}")
        if opts["dry_run"]:
            self.stdout.write(json.dumps({"embedder": embedder_identity(), "to_make": embeddings_stale().count()}))
            return

        def progress(made: int, skipped: int) -> None:
            if opts["verbosity"] > 1:
                self.stderr.write(f"a batch: {made} made, {skipped} forgotten meanwhile")

        try:
            result = reembed(batch_size=opts["batch_size"], rebuild_index=opts["rebuild_index"], on_batch=progress)
        except PermissionError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(json.dumps(dataclasses.asdict(result)))
