"""The suite runs on PostgreSQL unless DATABASE_URL says otherwise (the embedded SQLite default is for
running the service; the SQLite guard is tested on its own in tests/memory/test_guard_sqlite.py)."""
import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/ledger")
os.environ.setdefault("LEDGER_VAR_DIR", os.path.join(os.path.dirname(__file__), "var", "test"))
