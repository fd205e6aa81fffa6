"""Celery tasks of the retention app: the coverage audit (scheduled daily by memory migration 0006,
editable in the admin's periodic tasks)."""
from celery import shared_task

from retention.audit import coverage_audit


@shared_task(name="retention.coverage_audit", acks_late=True)
def coverage_audit_task() -> int:
    """Run the audit once; the report is kept (retention.CoverageReport). A second delivery runs it again,
    which only adds a report."""
    return coverage_audit(actor="celery-beat").pk
