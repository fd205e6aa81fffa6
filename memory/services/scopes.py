"""The scope tree: paths like `user:42/session:7`, with a closure table for descendants."""
from __future__ import annotations

import re

from django.db import IntegrityError, transaction

from memory import errors
from memory.models import Scope, ScopeClosure, Tenant

MAX_SCOPE_DEPTH = 16
_SEGMENT = re.compile(r"^[A-Za-z0-9_.-]{1,64}:[A-Za-z0-9_.@-]{1,128}$")


def scope_path_parse(path: object) -> list[str]:
    """Split and validate a scope path; raise `invalid_scope` with the reason."""
    if not isinstance(path, str) or not path.strip():
        raise errors.invalid("invalid_scope", "scope must be a path such as `user:42/session:7`.")
    segments = path.strip().strip("/").split("/")
    if len(segments) > MAX_SCOPE_DEPTH:
        raise errors.invalid("invalid_scope", f"A scope path has at most {MAX_SCOPE_DEPTH} levels.")
    for segment in segments:
        if not _SEGMENT.match(segment):
            raise errors.invalid(
                "invalid_scope",
                f"Scope segment {segment[:80]!r} must be `kind:key` (letters, digits, `_.-@`).",
            )
    return segments


def scope_get(*, tenant: Tenant, path: object) -> Scope:
    segments = scope_path_parse(path)
    scope = Scope.objects.filter(tenant=tenant, path="/".join(segments)).first()
    if scope is None:
        raise errors.not_found("No such scope.", scope="/".join(segments))
    return scope


def scope_get_or_create(*, tenant: Tenant, path: object) -> Scope:
    """The scope at `path`, creating it and any missing ancestors (with their closure rows)."""
    segments = scope_path_parse(path)
    full = "/".join(segments)
    existing = Scope.objects.filter(tenant=tenant, path=full).first()
    if existing:
        return existing
    parent = None
    for depth in range(1, len(segments) + 1):
        prefix = "/".join(segments[:depth])
        parent = _scope_child(tenant=tenant, parent=parent, path=prefix, depth=depth)
    return parent


def _scope_child(*, tenant: Tenant, parent: Scope | None, path: str, depth: int) -> Scope:
    scope = Scope.objects.filter(tenant=tenant, path=path).first()
    if scope:
        return scope
    try:
        with transaction.atomic():
            scope = Scope.objects.create(tenant=tenant, parent=parent, path=path, depth=depth)
            links = [ScopeClosure(ancestor=scope, descendant=scope, depth=0)]
            if parent is not None:
                links += [
                    ScopeClosure(ancestor_id=link.ancestor_id, descendant=scope, depth=link.depth + 1)
                    for link in ScopeClosure.objects.filter(descendant=parent)
                ]
            ScopeClosure.objects.bulk_create(links)
            return scope
    except IntegrityError:
        # Another writer created it first.
        return Scope.objects.get(tenant=tenant, path=path)


def scope_descendant_ids(scope: Scope):
    """A subquery of the ids of `scope` and every scope below it."""
    return ScopeClosure.objects.filter(ancestor=scope).values("descendant_id")
