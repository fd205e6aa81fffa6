"""Deployment settings (config/settings.py, README.md "Production"): with the documented production environment
`manage.py check --deploy` has nothing to report and the service speaks https only; without a SECRET_KEY,
anything but the embedded default refuses to start. Each runs `manage.py` in a process of its own, with only
the environment it names (the suite's own settings set a test SECRET_KEY and DATABASE_URL)."""
from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
# Nothing of this process's environment but what any process needs: the settings must come from what is named.
BASE_ENV = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}


def production_env(var_dir: Path) -> dict[str, str]:
    """The README's production block, its `<placeholders>` filled as an operator would."""
    block = re.search(r"<!-- production-settings -->\n```sh\n(.*?)\n```", README, re.S)
    assert block, "README.md has no production settings block"
    filled = {"SECRET_KEY": secrets.token_urlsafe(50), "LEDGER_SIGNING_PASSPHRASE": secrets.token_urlsafe(32)}
    documented = {}
    for line in block.group(1).splitlines():
        name, value = line.split("=", 1)
        documented[name] = filled.get(name, re.sub(r"<[^>]*>", "x", value))
    return {**BASE_ENV, **documented, "LEDGER_VAR_DIR": str(var_dir), "DJANGO_SETTINGS_MODULE": "config.settings"}


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def test_check_deploy_with_the_documented_production_settings_reports_nothing(tmp_path):
    # Given exactly the README's production environment
    env = production_env(tmp_path)
    # When Django's deployment checks run, failing on a warning
    done = manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    # Then they pass with nothing to say
    assert done.returncode == 0, done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout


def test_check_deploy_without_them_warns(tmp_path):
    # The test above can fail: the development defaults (plain http) are what check --deploy warns about.
    env = {**BASE_ENV, "LEDGER_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "config.settings"}
    done = manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert done.returncode != 0
    for code in ("security.W004", "security.W008", "security.W009", "security.W012", "security.W016"):
        assert code in done.stderr, code


def test_the_production_settings_serve_https_only(tmp_path):
    # Given the production environment, requests as the TLS-ending proxy forwards them
    script = """
import django
django.setup()
from django.test import Client
from django.test.utils import setup_test_environment
setup_test_environment()
plain = Client(HTTP_HOST="ledger.example.org")
tls = Client(HTTP_HOST="ledger.example.org", HTTP_X_FORWARDED_PROTO="https")
redirect = plain.get("/admin/login/")
print("redirect", redirect.status_code, redirect["Location"])
login = tls.get("/admin/login/")
print("hsts", login.status_code, login["Strict-Transport-Security"])
print("cookie", login.cookies["csrftoken"]["secure"])
print("healthz", plain.get("/healthz").status_code)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=production_env(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    # Then plain http is sent to https, and https answers with HSTS and https-only cookies
    assert said["redirect"] == "301 https://ledger.example.org/admin/login/"
    assert said["hsts"] == "200 max-age=31536000; includeSubDomains; preload"
    assert said["cookie"] == "True"
    # And a load balancer's plain-http health probe is answered, not redirected (503 here: no database)
    assert said["healthz"] in ("200", "503")


@pytest.mark.parametrize("database_url", ["postgres://ledger@127.0.0.1:5432/ledger", "sqlite:////tmp/ledger.sqlite3"])
def test_a_missing_secret_key_outside_the_embedded_default_refuses_to_start(tmp_path, database_url):
    # Given a DATABASE_URL (not the embedded default) and no SECRET_KEY
    env = {**BASE_ENV, "DATABASE_URL": database_url, "LEDGER_VAR_DIR": str(tmp_path),
           "DJANGO_SETTINGS_MODULE": "config.settings"}
    # When any command starts (the web server and the worker load the same settings)
    done = manage("check", env=env)
    # Then it stops at once, saying what is missing and how to make one
    assert done.returncode != 0
    assert "django.core.exceptions.ImproperlyConfigured: SECRET_KEY is not set." in done.stderr
    assert "secrets.token_urlsafe(50)" in done.stderr
    # And an empty one is as missing as an absent one
    assert "SECRET_KEY is not set." in manage("check", env={**env, "SECRET_KEY": ""}).stderr


def test_the_embedded_default_starts_without_a_secret_key(tmp_path):
    # No DATABASE_URL: SQLite under LEDGER_VAR_DIR, as `serve_embedded` runs (tests/test_embedded.py runs that whole)
    env = {**BASE_ENV, "LEDGER_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "config.settings"}
    done = manage("shell", "--verbosity", "0", "-c",
                  "from django.conf import settings; print(settings.EMBEDDED, bool(settings.SECRET_KEY))", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]


@pytest.mark.parametrize("value", ["0", "1001", "many"])
def test_an_hnsw_ef_search_outside_pgvectors_range_refuses_to_start(tmp_path, value):
    env = {**BASE_ENV, "LEDGER_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "config.settings",
           "LEDGER_HNSW_EF_SEARCH": value}
    done = manage("check", env=env)
    assert done.returncode != 0
    assert f"ImproperlyConfigured: LEDGER_HNSW_EF_SEARCH must be a whole number from 1 to 1000 (pgvector's range), " \
           f"not '{value}'." in done.stderr, done.stderr
