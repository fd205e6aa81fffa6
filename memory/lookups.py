"""`field__any_of=[...]`: membership in a list of ids as ONE bound array on PostgreSQL (`= ANY(%s)`).

`__in` spells out one placeholder per id, and building and quoting those statements cost more than the
database's own work in bulk forgets (bench/bench_forget.py, bench/bench_compaction.py). SQLite has no
arrays and keeps `IN (...)`; callers there keep batches under its variable limit.
"""
from django.db.models import Field, ForeignObject, Lookup


@ForeignObject.register_lookup
@Field.register_lookup
class AnyOf(Lookup):
    lookup_name = "any_of"
    prepare_rhs = False

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        ids = [int(value) for value in self.rhs]
        if connection.vendor == "postgresql":
            # The array as its text literal ('{1,2,3}'), cast by the server: psycopg's list dumper checks and
            # converts every element in Python, ~10x slower for batches of thousands of ids.
            return f"{lhs} = ANY(%s::bigint[])", [*lhs_params, "{" + ",".join(map(str, ids)) + "}"]
        if not ids:
            return "1 = 0", list(lhs_params)
        return f"{lhs} IN ({', '.join(['%s'] * len(ids))})", [*lhs_params, *ids]
