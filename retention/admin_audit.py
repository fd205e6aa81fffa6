"""Admin for the coverage audit (retention.audit): its reports and the write ledger, read-only."""
import json

from django.contrib import admin
from django.utils.html import format_html, format_html_join

from config.admin_pages import ReadOnlyAdmin

from retention.models import CoverageReport, WriteLedgerEntry


COLUMNS = ["ledgered", "at_rest", "live", "hidden", "redacted", "mandated", "held", "deleted_with_tombstone", "gaps",
           "unaccounted_deletions", "kept_past_mandate", "erasure_overdue", "unledgered"]


@admin.register(CoverageReport)
class CoverageReportAdmin(ReadOnlyAdmin):
    list_display = ["id", "started_at", "status", "gaps", "kept_past_mandate", "erasure_overdue", "seconds", "actor"]
    list_filter = ["status"]
    date_hierarchy = "started_at"
    ordering = ["-started_at"]
    fields = ["started_at", "finished_at", "actor", "status", "seconds", "totals_pretty", "per_class", "anomalies_pretty",
              "error"]
    readonly_fields = fields

    @admin.display(description="totals")
    def totals_pretty(self, report):
        return format_html("<pre>{}</pre>", json.dumps(report.totals, indent=2))

    @admin.display(description="anomalies")
    def anomalies_pretty(self, report):
        return format_html("<pre style='white-space: pre-wrap'>{}</pre>", json.dumps(report.anomalies, indent=2))

    @admin.display(description="per content class (examples of ids under each finding)")
    def per_class(self, report):
        head = format_html_join("", "<th>{}</th>", ((c.replace("_", " "),) for c in ["tenant", "class", *COLUMNS]))
        rows = format_html_join("", "<tr>{}</tr>", (
            (format_html_join("", "<td>{}</td>", ((v,) for v in [c.get("tenant"), c.get("content_class"),
                                                                  *[c.get(k) for k in COLUMNS]])),)
            for c in report.classes))
        samples = format_html_join("", "<li>{} / {}: {}</li>", (
            (c.get("content_class"), finding, ", ".join(map(str, ids)))
            for c in report.classes for finding, ids in (c.get("samples") or {}).items()))
        return format_html("<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table><ul>{}</ul>", head, rows, samples)


@admin.register(WriteLedgerEntry)
class WriteLedgerEntryAdmin(ReadOnlyAdmin):
    list_display = ["id", "record_id", "tenant_id", "content_class_id", "created_at", "written_at", "backfilled"]
    search_fields = ["=record_id"]
    show_full_result_count = False
    ordering = ["-id"]
