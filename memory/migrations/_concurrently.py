"""Indexes that migrations build CONCURRENTLY on a store in use (memory 0014 and 0016): reads and writes of the
table go on while the index builds. Not a migration (Django's loader skips modules whose name starts with `_`);
frozen with the migrations that import it, as they are.

A CONCURRENTLY build runs outside any transaction (the migration is not atomic) and, cut short (cancelled, the
server stopped), leaves an invalid index behind that no query uses: the next run of the migration drops it and
builds it anew."""


def index_valid(connection, name: str) -> bool | None:
    """Whether index `name` is valid (False: left invalid by a build cut short), None when there is none."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", [name])
        found = cursor.fetchone()
    return found[0] if found else None


def index_build(schema_editor, name: str, create: str) -> None:
    """Index `name` by the `CREATE INDEX CONCURRENTLY` statement `create`, unless it is there and valid; an invalid
    one is dropped first."""
    valid = index_valid(schema_editor.connection, name)
    if valid:
        return
    if valid is False:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY {name}", params=None)
    schema_editor.execute(create, params=None)
