"""Admin for the sweep runs (memory.sweeps): read-only, as every history is. The schedules themselves are
django-celery-beat's periodic tasks, edited on their own admin pages."""
import json

from django.contrib import admin
from django.utils.html import format_html

from config.admin_pages import ReadOnlyAdmin, ReadOnlyMixin

from memory.models import SweepBatch, SweepRun


def _pretty(value) -> str:
    return format_html("<pre style='white-space: pre-wrap'>{}</pre>", json.dumps(value, indent=2, default=str))


class SweepBatchInline(ReadOnlyMixin, admin.TabularInline):
    model = SweepBatch
    fields = ["at", "first_id", "last_id", "counts", "forget_event_ids", "tombstone_ids"]
    readonly_fields = fields
    extra = 0
    show_change_link = False
    ordering = ["-at"]
    max_num = 0


@admin.register(SweepRun)
class SweepRunAdmin(ReadOnlyAdmin):
    list_display = ["id", "kind", "dry_run", "status", "started_at", "finished_at", "batches", "summary", "actor"]
    list_filter = ["kind", "status", "dry_run"]
    date_hierarchy = "started_at"
    show_full_result_count = False
    ordering = ["-started_at"]
    fields = ["kind", "dry_run", "status", "actor", "started_at", "heartbeat_at", "finished_at", "cursor", "batches",
              "counts_pretty", "report_pretty", "errors_pretty", "resumed_by"]
    readonly_fields = fields
    inlines = [SweepBatchInline]

    @admin.display(description="counts")
    def summary(self, run):
        counts = run.counts or {}
        shown = {k: v for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool)}
        return ", ".join(f"{k} {v}" for k, v in shown.items()) or ("(dry run: see report)" if run.dry_run else "-")

    @admin.display(description="counts")
    def counts_pretty(self, run):
        return _pretty(run.counts)

    @admin.display(description="report (a dry run: what it would do; else what stays, and why)")
    def report_pretty(self, run):
        return _pretty(run.report)

    @admin.display(description="errors")
    def errors_pretty(self, run):
        return _pretty(run.errors)
