"""Admin for the store. Deleting a record goes through the one guarded forget: a locked record offers
no delete at all, and the bulk action is a hard forget that reports each refusal."""
from django.contrib import admin, messages
from django.db.models import Q
from django.utils import timezone
from django.utils.html import format_html

from config.admin_pages import ReadOnlyAdmin
from config.errors import ApplicationError
from memory.models import ApiToken, DerivedArtifact, ForgetEvent, ForgetMode, Record, Scope, Subject, Tenant
from memory.services import ForgetTarget, records_forget
from memory.subjects import subject_ids_search, subject_ref_normalize


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    search_fields = ["name"]

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Subject)
class SubjectAdmin(admin.ModelAdmin):
    list_display = ["ref", "tenant", "created_at", "merged_into"]
    search_fields = ["ref"]
    list_select_related = ["tenant", "merged_into"]
    # A reference is stored in normal form by the services (memory.subjects) and names the person in every
    # record, hold and request: not typed in here, where it would bypass the normalization.
    readonly_fields = ["tenant", "ref", "merged_into", "created_at"]

    def has_add_permission(self, request):
        return False

    def get_search_results(self, request, queryset, search_term):
        # References are stored in normal form (memory.subjects): "José" typed in NFD finds them too.
        try:
            search_term = subject_ref_normalize(search_term)
        except ApplicationError:
            pass  # no normal form (empty, control characters): searched as typed, finding nothing
        return super().get_search_results(request, queryset, search_term)

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Scope)
class ScopeAdmin(admin.ModelAdmin):
    list_display = ["path", "tenant", "depth"]
    search_fields = ["path"]
    list_select_related = ["tenant"]
    raw_id_fields = ["parent"]

    def has_delete_permission(self, request, obj=None):
        return False


def short_datetime(value):
    """A date and time in a list column: 2026-12-05 09:30 (UTC, as the admin runs), never wrapped."""
    if value is None:
        return "-"
    return format_html('<span class="ledger-date" title="{}">{}</span>', value.isoformat(),
                       f"{value:%Y-%m-%d %H:%M}")


@admin.register(Record)
class RecordAdmin(admin.ModelAdmin):
    list_display = ["id", "tenant", "scope", "subject", "content_class", "tier", "created", "forgotten",
                    "retained", "held"]
    list_select_related = ["tenant", "scope", "content_class", "subject"]
    # A record by its id, or a subject's records by a piece of the reference: the primary key, and the subjects'
    # trigram index (memory 0015) then the records' subject index. Never a scan of the records' content.
    search_fields = ["=id"]
    search_help_text = "A record id, or a piece of a subject's reference (cust-100)."
    # Filters the indexes answer on a table of millions: forgotten (the partial index on forgotten_at), the
    # content class (its foreign key's index), the tenant (record_tenant_subject_idx). No date hierarchy: its
    # year list is a DISTINCT over the whole table.
    list_filter = [("forgotten_at", admin.EmptyFieldListFilter), "content_class", "tenant"]
    show_full_result_count = False
    raw_id_fields = ["scope", "subject", "forget_event"]
    readonly_fields = ["commitment", "salt", "forgotten_at", "redacted_at", "erasure_pending", "forget_event",
                       "retained_until", "held", "lock_protects_content", "created_at"]
    actions = ["forget_hard"]

    class Media:
        css = {"all": ["ledger/admin.css", "ledger/lists.css"]}

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term:
            return queryset, False
        match = Q(subject_id__in=subject_ids_search(term))
        if term.isascii() and term.isdigit() and len(term) < 19:
            match |= Q(pk=int(term))
        return queryset.filter(match), False

    @admin.display(description="created at", ordering="created_at")
    def created(self, obj):
        return short_datetime(obj.created_at)

    @admin.display(description="forgotten at", ordering="forgotten_at")
    def forgotten(self, obj):
        return short_datetime(obj.forgotten_at)

    @admin.display(description="retained until", ordering="retained_until")
    def retained(self, obj):
        return short_datetime(obj.retained_until)

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def has_add_permission(self, request):
        return False  # records are written through the memory API (record_write: commitment, lock, embedding)

    def has_change_permission(self, request, obj=None):
        return False  # an edit here would bypass the write path and break the record's commitment

    def has_delete_permission(self, request, obj=None):
        if obj is not None and (obj.held or (obj.retained_until and obj.retained_until > timezone.now())):
            return False
        return super().has_delete_permission(request, obj)

    def delete_model(self, request, obj):
        records_forget(tenant=obj.tenant, target=ForgetTarget(record_ids=(obj.pk,)), mode=ForgetMode.HARD,
                       actor=f"admin:{request.user.username}", path="admin", reason="admin delete",
                       public_actor=f"user:{request.user.pk}")

    @admin.action(description="Forget (hard) through the retention guard", permissions=["delete"])
    def forget_hard(self, request, queryset):
        # Ids only, never records: the changelist's queryset joins `list_select_related`, which a `.only()` of the
        # record cannot defer (FieldError, issue 19); `values_list` drops the joins and loads no content.
        by_tenant: dict[int, list[int]] = {}
        for tenant_id, pk in queryset.order_by("pk").values_list("tenant_id", "pk"):
            by_tenant.setdefault(tenant_id, []).append(pk)
        tenants = Tenant.objects.in_bulk(list(by_tenant))
        for tenant_id, ids in by_tenant.items():
            tenant = tenants[tenant_id]
            try:
                result = records_forget(tenant=tenant, target=ForgetTarget(record_ids=tuple(ids)),
                                        mode=ForgetMode.HARD, actor=f"admin:{request.user.get_username()}",
                                        path="admin", reason="admin bulk forget", public_actor=f"user:{request.user.pk}")
            except ApplicationError as exc:
                self.message_user(request, f"{tenant}: refused: {exc.detail} ({exc.code})", messages.ERROR)
                continue
            refused = [r for r in result.results if r["outcome"] == "refused"]
            said = (f"{tenant}: forget #{result.event.pk} {result.status}: {len(result.results) - len(refused)} "
                    f"deleted, {len(refused)} refused.")
            if refused:
                said += " " + refusals_text(refused)
            self.message_user(request, said, messages.WARNING if refused else messages.SUCCESS)


def refusals_text(refused: list[dict], *, listed: int = 20) -> str:
    """Why the guard kept records, one clause per distinct reason: its code, every rule or hold that blocks
    (authority, and the lock's end), the modes still permitted, and the records (the first `listed`)."""
    groups: dict[tuple, list[int]] = {}
    for result in refused:
        reason = result["reason"]
        blocking = tuple(dict.fromkeys(
            f"{b.get('authority') or b.get('matter') or b.get('type')}"
            + (f" until {b['until'][:10]}" if b.get("until") else "")
            for b in reason.get("blocking") or [])) or (reason.get("authority") or "",)
        key = (reason["code"], blocking, tuple(reason.get("permitted_modes") or ()))
        groups.setdefault(key, []).append(result["record_id"])
    clauses = []
    for (code, blocking, permitted), ids in groups.items():
        shown = ", ".join(str(pk) for pk in ids[:listed]) + (f" and {len(ids) - listed} more" if len(ids) > listed
                                                              else "")
        clauses.append(f"{code} ({'; '.join(b for b in blocking if b)}; still permitted: "
                       f"{', '.join(permitted) or 'none'}): record{'s' if len(ids) > 1 else ''} {shown}")
    return "Kept by the retention guard: " + ". ".join(clauses) + "."


@admin.register(DerivedArtifact)
class DerivedArtifactAdmin(ReadOnlyAdmin):
    """Viewed only. Artifacts are written through the memory API (artifact_write: lineage, embedding) and forgotten
    through the one guarded forget; an edit here would bypass both: a forgotten or redacted copy given back its
    content or its visibility after its tombstone said otherwise, or an embedding's vector and embedder out of
    step (`manage.py reembed` makes vectors again)."""
    list_display = ["id", "kind", "tenant", "holder", "embedder", "created_at", "forgotten_at"]
    list_filter = ["kind"]
    list_select_related = ["tenant"]
    show_full_result_count = False


@admin.register(ForgetEvent)
class ForgetEventAdmin(ReadOnlyAdmin):
    list_display = ["id", "tenant", "path", "mode", "status", "actor", "created_at", "confirmed_at"]
    list_filter = ["status", "mode", "path"]
    list_select_related = ["tenant"]
    show_full_result_count = False


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    list_display = ["prefix", "tenant", "role", "created_at", "revoked_at"]
    exclude = ["key_hash"]
from memory import admin_sweeps  # noqa: E402,F401  (sweep runs, read-only)
