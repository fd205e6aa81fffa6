"""What changed between two versions of a retention table (`RetentionTableVersion.rules`), for the admin's
history: rules added, rules gone (retired), and each changed field with its value before and after.
A pure function of the two snapshots: the versions are the record, nothing else is consulted.
"""
from __future__ import annotations

from dataclasses import dataclass, field

FIELDS = ("content_class", "kind", "duration_days", "authority", "mode", "protects")


@dataclass(frozen=True)
class RuleChange:
    rule_id: int
    change: str  # "added", "removed" or "changed"
    rule: dict
    fields: tuple[tuple[str, object, object], ...] = field(default_factory=tuple)

    def describe(self) -> str:
        if self.change == "added":
            return (f"added rule {self.rule_id}: {self.rule.get('content_class')} {self.rule.get('kind')} "
                    f"{self.rule.get('duration_days')} days ({self.rule.get('authority')}, {self.rule.get('mode')})")
        if self.change == "removed":
            return f"removed rule {self.rule_id}: {self.rule.get('content_class')} ({self.rule.get('authority')})"
        return f"rule {self.rule_id}: " + ", ".join(f"{name} {before} → {after}" for name, before, after in self.fields)


def table_diff(before: list[dict] | None, after: list[dict] | None) -> list[RuleChange]:
    """The changes from `before` (None for the first version) to `after`, by rule id."""
    old = {r["id"]: r for r in before or []}
    new = {r["id"]: r for r in after or []}
    changes = []
    for rule_id in sorted(old.keys() | new.keys()):
        if rule_id not in old:
            changes.append(RuleChange(rule_id, "added", new[rule_id]))
        elif rule_id not in new:
            changes.append(RuleChange(rule_id, "removed", old[rule_id]))
        else:
            fields = tuple((name, old[rule_id].get(name), new[rule_id].get(name)) for name in FIELDS
                           if old[rule_id].get(name) != new[rule_id].get(name))
            if fields:
                changes.append(RuleChange(rule_id, "changed", new[rule_id], fields))
    return changes
