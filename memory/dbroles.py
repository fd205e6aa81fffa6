"""Least privilege on PostgreSQL: an owner role migrates, an application role serves.

The owner role owns every table, trigger and function (it runs `manage.py migrate`). The application role,
which the service, its workers and its management commands connect as, may read and write rows, and no more:
  - no TRUNCATE, no TRIGGER, no REFERENCES, no DDL (it owns nothing, so it cannot drop or disable a trigger);
  - on `memory_record`, UPDATE of every column but the lock (`retained_until`, `held`,
    `lock_protects_content`) and the generated ones (`content_search`): a record's lock is computed by the database at INSERT and changed only by the
    SECURITY DEFINER lock functions (memory migration 0013), which recompute it from the rules and holds;
  - no write on `retention_lockrecomputegrant` (the row that lets the guard trigger accept a shorter lock: only
    the lock functions insert it) nor on `django_migrations`;
  - EXECUTE on the lock functions, which nobody else (PUBLIC) may call.
`app_role_grant` (re)applies all of this; it is idempotent, and is run after every `migrate` (the command
`db_grant_app_role`, or automatically when LEDGER_DB_APP_ROLE is set: memory.apps).
"""
from __future__ import annotations

from psycopg import sql

LOCK_COLUMNS = ("retained_until", "held", "lock_protects_content")
# Tables the application role may read but never write.
READ_ONLY_TABLES = ("retention_lockrecomputegrant", "django_migrations")
LOCK_FUNCTIONS = ("retention_locks_recompute_classes(bigint[])", "retention_locks_recompute_hold(bigint)",
                  "retention_lock_override(bigint)")


class RoleError(Exception):
    """The role cannot serve as the application role (it would hold more than row access)."""


def _role_check(cursor, role: str) -> None:
    cursor.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = %s", [role])
    row = cursor.fetchone()
    if row is None:
        raise RoleError(f"no role {role!r} (create it first, or pass --create)")
    if row[0] or row[1]:
        raise RoleError(f"{role!r} is a superuser or bypasses row security: it would pass every guard")
    cursor.execute("SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = to_regclass('memory_record')")
    owner = cursor.fetchone()
    if owner is None or owner[0] is None:
        raise RoleError("the database has no memory_record table: run `manage.py migrate` (as the owner) first")
    if owner[0] == role:
        raise RoleError(f"{role!r} owns the tables: it could drop the guard triggers; serve with another role")
    cursor.execute("SELECT pg_has_role(%s, %s, 'MEMBER')", [role, owner[0]])
    if cursor.fetchone()[0]:
        raise RoleError(f"{role!r} is a member of the owner role {owner[0]!r}: it holds the owner's rights")


def app_role_create(cursor, *, role: str, password: str | None) -> bool:
    """Create the role (LOGIN, nothing else) if it does not exist. Returns whether it was created."""
    cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role])
    if cursor.fetchone():
        return False
    statement = sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS").format(
        sql.Identifier(role))
    if password:
        statement = sql.SQL("{} PASSWORD {}").format(statement, sql.Literal(password))
    cursor.execute(statement)
    return True


def app_role_grant(cursor, *, role: str) -> list[str]:
    """Grant the application role row access and nothing more (see the module docstring). Returns the
    statements run, for the command to print."""
    _role_check(cursor, role)
    cursor.execute("SELECT current_schema()")
    schema = sql.Identifier(cursor.fetchone()[0])
    who = sql.Identifier(role)
    # Generated columns (the keyword index's `content_search`, memory 0014) are the database's to compute: no
    # UPDATE on them (PostgreSQL would refuse any value but DEFAULT anyway).
    cursor.execute("SELECT attname FROM pg_attribute WHERE attrelid = 'memory_record'::regclass AND attnum > 0 "
                   "AND NOT attisdropped AND attgenerated = '' ORDER BY attnum")
    writable = [c for (c,) in cursor.fetchall() if c not in LOCK_COLUMNS]
    statements = [
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, who),
        sql.SQL("REVOKE ALL ON ALL TABLES IN SCHEMA {} FROM {}").format(schema, who),
        sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {} TO {}").format(schema, who),
        sql.SQL("REVOKE INSERT, UPDATE, DELETE ON {} FROM {}").format(
            sql.SQL(", ").join(map(sql.Identifier, READ_ONLY_TABLES)), who),
        sql.SQL("REVOKE UPDATE ON memory_record FROM {}").format(who),
        sql.SQL("GRANT UPDATE ({}) ON memory_record TO {}").format(
            sql.SQL(", ").join(map(sql.Identifier, writable)), who),
        sql.SQL("REVOKE ALL ON ALL SEQUENCES IN SCHEMA {} FROM {}").format(schema, who),
        sql.SQL("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {} TO {}").format(schema, who),
        *[sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}").format(sql.SQL(f), who) for f in LOCK_FUNCTIONS],
    ]
    done = []
    for statement in statements:
        cursor.execute(statement)
        done.append(statement.as_string(cursor.connection))
    return done
