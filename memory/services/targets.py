"""What a forget aims at: listed records, a scope (with descendants), a tag, or subjects."""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from memory import errors
from memory.models import Record, RecordTag, Tenant
from memory.services.scopes import scope_descendant_ids, scope_get, scope_path_parse
from memory.subjects import subject_ids_find, subject_ref_normalize

# One request may name this many records or subjects; more is a batch job's business.
MAX_TARGET_ITEMS = 10_000


@dataclass(frozen=True)
class ForgetTarget:
    record_ids: tuple[int, ...] = ()
    scope: str | None = None
    tag: str | None = None
    subjects: tuple[str, ...] = ()

    @classmethod
    def parse(cls, data: object) -> "ForgetTarget":
        """Validate the API's `target` object: exactly one of record_id, scope, tag, subject."""
        keys = {"record_id", "scope", "tag", "subject"}
        if not isinstance(data, dict) or len(data) != 1 or not set(data) <= keys:
            raise errors.invalid("invalid_target", "target must be an object with exactly one of: "
                                 "record_id, scope, tag, subject.")
        (key, value), = data.items()
        if key == "record_id":
            ids = value if isinstance(value, list) else [value]
            if not ids or len(ids) > MAX_TARGET_ITEMS or any(isinstance(i, bool) or not isinstance(i, int) or i < 1
                                                              for i in ids):
                raise errors.invalid("invalid_target", f"record_id must be a record id or a list of 1 to "
                                     f"{MAX_TARGET_ITEMS} record ids.")
            return cls(record_ids=tuple(sorted(set(ids))))
        if key == "scope":
            return cls(scope="/".join(scope_path_parse(value)))
        if key == "tag":
            if not isinstance(value, str) or not 0 < len(value) <= 100:
                raise errors.invalid("invalid_target", "tag must be a string of 1 to 100 characters.")
            return cls(tag=value)
        refs = value if isinstance(value, list) else [value]
        if not refs or len(refs) > MAX_TARGET_ITEMS:
            raise errors.invalid("invalid_target", f"subject must be a reference or a list of 1 to "
                                 f"{MAX_TARGET_ITEMS} references.")
        try:
            # The form records were written under (memory.subjects): " José Müller " names "José Müller".
            normal = {subject_ref_normalize(r) for r in refs}
        except errors.MemoryError as exc:
            raise errors.invalid("invalid_target", f"target.subject: {exc.detail}") from None
        return cls(subjects=tuple(sorted(normal)))

    def records(self, tenant: Tenant) -> QuerySet:
        """The tenant's records this target names, forgotten ones included (a later forget may go further).

        Unknown ids, scopes or subjects are `not_found`: a forget never silently aims at nothing.
        """
        records = Record.objects.filter(tenant=tenant)
        if self.record_ids:
            # any_of: the ids as one bound array on PostgreSQL (memory/lookups.py), not one literal each.
            self.records_check(set(records.filter(pk__any_of=self.record_ids).values_list("pk", flat=True)))
            return records.filter(pk__any_of=self.record_ids)
        if self.scope is not None:
            return records.filter(scope_id__in=scope_descendant_ids(scope_get(tenant=tenant, path=self.scope)))
        if self.tag is not None:
            return records.filter(pk__in=RecordTag.objects.filter(name=self.tag, record__tenant=tenant)
                                  .values("record_id"))
        refs = {subject_ref_normalize(r) for r in self.subjects}
        found = subject_ids_find(tenant=tenant, refs=refs)
        if len(found) != len(refs):
            raise errors.not_found("Some subjects are unknown to this tenant.")
        return records.filter(subject_id__any_of=sorted(found.values()))

    def records_check(self, found) -> None:
        """`not_found` unless every listed record is among `found` (the ids of the tenant's records that a
        query for them found)."""
        if len(self.record_ids) != len(set(self.record_ids)) or any(pk not in found for pk in self.record_ids):
            missing = sorted(set(self.record_ids) - set(found))
            raise errors.not_found("Some records do not exist (or belong to another tenant).",
                                   record_ids=missing[:100])

    def _subject_ids(self, tenant: Tenant) -> list[int]:
        return sorted(subject_ids_find(tenant=tenant, refs=self.subjects).values())

    def describe(self, tenant: Tenant) -> dict:
        """The target as a tombstone may show it: no subject reference in clear, only internal ids."""
        if self.record_ids:
            return {"record_ids": [str(i) for i in self.record_ids]}
        if self.scope is not None:
            return {"scope": self.scope}
        if self.tag is not None:
            return {"tag": self.tag}
        return {"subject_ids": [str(i) for i in self._subject_ids(tenant)]}
