"""Settings, read from the environment; the defaults are the embedded development setup.

Embedded default: SQLite in ./var and Kombu's filesystem broker in ./var/broker, so that the service
and a real Celery worker run with no server installed. Production and CI set DATABASE_URL
(PostgreSQL) and CELERY_BROKER_URL (Redis), and production the HTTPS settings below (README.md, "Production").
"""
from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(environ.Env().str("LEDGER_VAR_DIR", default=str(BASE_DIR / "var")))

env = environ.Env()
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env.bool("DEBUG", default=False)
# The embedded default is the service run with no DATABASE_URL (SQLite under LEDGER_VAR_DIR): a developer's
# machine, `serve_embedded`. Only there may SECRET_KEY be missing; its development key is public.
EMBEDDED = not env.str("DATABASE_URL", default="")
SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not EMBEDDED:
        # Anything else (DATABASE_URL set: production, a staging copy, a benchmark) refuses to start rather than
        # sign its sessions and password-reset links with a key anyone can read in this file.
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. It is required whenever DATABASE_URL is set (only the embedded default, with no "
            "DATABASE_URL, runs with a development key). Set SECRET_KEY to a long random string, e.g. the output of "
            "python -c 'import secrets; print(secrets.token_urlsafe(50))'.")
    SECRET_KEY = "dev-only-insecure-secret-key-change-me"
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])

# HTTPS. Off by default: the embedded default and the test suite serve plain http. Production turns them on
# (README.md, "Production"; `manage.py check --deploy` then has nothing to say). Behind a proxy that ends TLS,
# SECURE_PROXY_SSL_HEADER names the header by which it says so, e.g. `HTTP_X_FORWARDED_PROTO,https`.
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)
SECURE_PROXY_SSL_HEADER = env.tuple("SECURE_PROXY_SSL_HEADER", default=None)
# A load balancer's health probe may speak plain http to the instance itself.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
# A site that redirects to https sends its cookies over https only, unless told otherwise.
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=SECURE_SSL_REDIRECT)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=SECURE_SSL_REDIRECT)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "django_celery_beat",
    "axes",
    "memory",
    "retention",
    "dsr",
    "tombstones",
    "agents_mcp",
    "drp",
    "alerts",
    "audit_exports",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "config.middleware.RejectNulMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: it turns a login refused for a lockout into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# The admin login, rate-limited by django-axes: its backend first refuses a locked-out login before the
# password is checked. It needs the request (Django's login view passes it; a test's `client.login` must pass
# `request=HttpRequest()`, or use `force_login`). API tokens (memory.auth) are not passwords and never go through
# authenticate().
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
# Locked after this many failures, counted per account (from any address) and, separately, per address (for any
# account), in the attempts of the last cool-off; the lock ends a cool-off after the last attempt.
AXES_FAILURE_LIMIT = env.int("LEDGER_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("LEDGER_LOGIN_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
# A success does not wipe the failures: it would wipe its address's too, and an attacker with one account of
# their own could then guess another's password without end by logging in to theirs between guesses.
AXES_RESET_ON_SUCCESS = False
# A page in the admin's frame that says why and for how long (429), not axes' one line of text.
AXES_LOCKOUT_CALLABLE = "dsr.admin_logins.login_locked"
# Failed attempts (and so lockouts) are shown and lifted in the admin by dsr/admin_logins.py, logins read-only.
AXES_ENABLE_ADMIN = False
# No banner at every start; lockouts are still logged (WARNING).
AXES_VERBOSE = False

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'ledger.sqlite3'}"),
}
# A unix socket's directory as the URL's host, percent-encoded (postgres://user@%2Frun%2Fpostgresql/ledger, the
# tests' own server: config/testdb.py): django-environ leaves it quoted, and libpq wants the path.
if DATABASES["default"].get("HOST", "").startswith("%2F"):
    DATABASES["default"]["HOST"] = unquote(DATABASES["default"]["HOST"])
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several processes (web, worker) share the file: wait for the write lock instead of failing.
    # WAL: readers (the web server) and the one writer at a time (web or worker) do not block each other.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL"})
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# SQLite (the embedded default) ignores an index's INCLUDE columns: the index still works, only less covering.
SILENCED_SYSTEM_CHECKS = ["models.W040"]

CACHES = {"default": env.cache("CACHE_URL", default="locmemcache://ledger-read-cache")}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

# Bodies above this are refused with 413 `payload_too_large` before any parsing.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("DATA_UPLOAD_MAX_MEMORY_SIZE", default=1024 * 1024)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["memory.auth.ApiTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["config.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "config.errors.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "config.schema.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Forgetting Ledger API",
    "DESCRIPTION": "Governed agent memory, retention mandates, subject requests and signed tombstones.",
    "VERSION": "1",
    # The schema endpoint is not an operation of the API; the one PATCH (a rule's duration) takes the
    # whole body, not a partial one.
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_PATCH": False,
    "ENUM_NAME_OVERRIDES": {
        "ArtifactKindEnum": "memory.models.ArtifactKind",
        "RuleKindEnum": "retention.models.RuleKind",
        "ForgetModeEnum": "memory.models.ForgetMode",
        "RuleModeEnum": "retention.models.RuleMode",
        "RequestTypeEnum": "dsr.models.RequestType",
    },
}

# Celery. The embedded default is Kombu's filesystem transport: a real broker protocol, no server.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = VAR_DIR / "broker"
    for _sub in ("queue", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "store_processed": False,
        # The exchange tables (broadcasts: remote control, the worker's mingle); Kombu's default is
        # ./control, relative to wherever the process was started.
        "control_folder": str(_broker_dir / "control"),
    }
# Tasks report through the database, so no task keeps a result unless it asks (only config.ping, for
# /healthz?worker=1). The embedded default keeps results as files, Redis keeps them beside its queues.
if CELERY_BROKER_URL.startswith("filesystem://"):
    (VAR_DIR / "results").mkdir(parents=True, exist_ok=True)
    _default_result_backend = f"file://{VAR_DIR / 'results'}"
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    _default_result_backend = CELERY_BROKER_URL
else:
    _default_result_backend = None
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default=_default_result_backend)
CELERY_TASK_IGNORE_RESULT = True
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # A message a dead worker had taken comes back after this many seconds (Redis' visibility timeout);
    # every workflow step is idempotent, so an early redelivery of a slow step is harmless.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env.int("LEDGER_BROKER_VISIBILITY_TIMEOUT", default=300),
        # How often a worker looks for the messages of a dead worker whose visibility timeout passed: every
        # interval x throttle seconds (Kombu's defaults, 10 x 10: up to 100 s after the timeout).
        "unacked_restore_interval": env.int("LEDGER_BROKER_RESTORE_INTERVAL", default=10),
        "unacked_restore_throttle": env.int("LEDGER_BROKER_RESTORE_THROTTLE", default=10),
    }
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_TASK_DEFAULT_QUEUE", default="ledger")
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = False
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# Celery's Django fixup closes every database connection after every task (Celery >= 5.6 no longer reads
# CONN_MAX_AGE), so a worker paid a new PostgreSQL backend, with cold catalog caches, for every delivery,
# even one that only finds its work done (~2 ms of worker CPU each in bench_workflow.py). With this it
# force-closes them only every N tasks, and config/celery.py applies Django's own rules around each task, as
# around a web request: closed after it unless DATABASE_URL sets CONN_MAX_AGE (the default, 0, still closes
# after every task), and with CONN_HEALTH_CHECKS checked before a kept connection is used again.
CELERY_DB_REUSE_MAX = env.int("LEDGER_WORKER_DB_REUSE_MAX", default=1000)

# The embedder that turns content into vectors for similarity search (dotted path to a class; memory.embedding).
# After it changes on a store that has vectors, `manage.py reembed` makes them again (README, "Changing the
# embedder").
LEDGER_EMBEDDER = env.str("LEDGER_EMBEDDER", default="memory.embedding.WordLlamaEmbedder")
# Candidates the HNSW similarity index keeps per search (pgvector's `hnsw.ef_search`, 1-1000); unset (None), the
# embedder's own `hnsw_ef_search`: what its vectors need for recall@10 >= 0.95 at 1,000,000 as measured
# (memory.embedding; bench/README.md, "bench_search.py"). A search costs about linearly in it.
_ef_search = env.str("LEDGER_HNSW_EF_SEARCH", default="").strip()
if _ef_search and not (_ef_search.isdecimal() and 1 <= int(_ef_search) <= 1000):
    raise ImproperlyConfigured(f"LEDGER_HNSW_EF_SEARCH must be a whole number from 1 to 1000 (pgvector's range), "
                               f"not {_ef_search!r}.")
LEDGER_HNSW_EF_SEARCH = int(_ef_search) if _ef_search else None
# A hidden record with no lock has its content purged by compaction within this many days.
LEDGER_COMPACTION_GRACE_DAYS = env.int("LEDGER_COMPACTION_GRACE_DAYS", default=30)
# Days another agent has to acknowledge forgetting its copy (then the copy is a reported gap).
LEDGER_FLEET_ACK_DAYS = env.int("LEDGER_FLEET_ACK_DAYS", default=7)
# Records per transaction of the erasure workflow's execute step (dsr/services/workflow.py says why).
LEDGER_EXECUTE_BATCH = env.int("LEDGER_EXECUTE_BATCH", default=500)
# Seconds one workflow task goes on running the steps that are due before it enqueues the next one
# (dsr/tasks.py says why); 0 enqueues every step.
LEDGER_WORKFLOW_INLINE_SECONDS = env.float("LEDGER_WORKFLOW_INLINE_SECONDS", default=10.0)
# Requests one workflow step runs for at once: its own and others of its tenant due at the same step,
# claimed with SKIP LOCKED (dsr/services/workflow.py says why 50); 1 runs every request on its own.
LEDGER_WORKFLOW_GROUP_SIZE = env.int("LEDGER_WORKFLOW_GROUP_SIZE", default=50)
# Sweeps (memory.sweeps, dsr.services.deferred): records per batch of compaction and pact-TTL expiry (one
# claim, one forget and one tombstone per tenant per batch); a run whose last batch is older than
# LEDGER_SWEEP_STALE_SECONDS lost its worker, and the next run of its kind takes over.
LEDGER_SWEEP_BATCH = env.int("LEDGER_SWEEP_BATCH", default=5000)
LEDGER_SWEEP_STALE_SECONDS = env.int("LEDGER_SWEEP_STALE_SECONDS", default=900)
# The coverage audit (retention.audit) reports a record kept past its time or an erasure overdue only
# once it is this many hours late: the sweeps run on a schedule, not at the second a lock ends.
LEDGER_AUDIT_TOLERANCE_HOURS = env.int("LEDGER_AUDIT_TOLERANCE_HOURS", default=24)
# Largest record content accepted by the memory API (characters).
# PostgreSQL: the role the service connects as, when it is not the owner that migrates (memory/dbroles.py).
# Set, `migrate` re-grants it its row access after every run.
LEDGER_DB_APP_ROLE = env.str("LEDGER_DB_APP_ROLE", default="")
LEDGER_MAX_CONTENT_CHARS = env.int("LEDGER_MAX_CONTENT_CHARS", default=64 * 1024)

# Where subjects are sent to verify their tombstones (the public verification page).
LEDGER_PUBLIC_URL = env.str("LEDGER_PUBLIC_URL", default="http://127.0.0.1:8000")
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="privacy@forgetting-ledger.local")
# Mail. By default each mail is a file under LEDGER_VAR_DIR/mail with one log line (config/mail.py: development,
# serve_embedded). Production sends through SMTP: EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend and
# EMAIL_HOST, EMAIL_PORT, EMAIL_HOST_USER, EMAIL_HOST_PASSWORD, EMAIL_USE_TLS or EMAIL_USE_SSL, EMAIL_TIMEOUT;
# or all of them as one EMAIL_URL (django-environ: smtp+tls://user:password@host:587).
EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="config.mail.FileEmailBackend")
EMAIL_FILE_PATH = env.str("EMAIL_FILE_PATH", default=str(VAR_DIR / "mail"))
EMAIL_HOST = env.str("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_HOST_USER = env.str("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env.str("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
EMAIL_USE_SSL = env.bool("EMAIL_USE_SSL", default=False)
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT", default=30)  # seconds: a stuck SMTP server must not hold a worker
if env.str("EMAIL_URL", default=""):
    vars().update(env.email_url("EMAIL_URL"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
}

# --- tombstones ---
# Encrypts the tombstone and checkpoint signing keys at rest. Unset in development: a generated
# passphrase is kept in VAR_DIR/tombstone-signing-passphrase (shared by web and worker), with a warning.
LEDGER_SIGNING_PASSPHRASE = env.str("LEDGER_SIGNING_PASSPHRASE", default="")
# scrypt's cost for a new key's encryption, as log2(N): 2**15 takes ~0.1 s (once per key per process). Not read
# from the environment: only the test settings lower it, to 2**10. A sealed key records its own N.
LEDGER_SIGNING_KEY_SCRYPT_LOG2_N = 15
# Batches of 64 tombstones or more (a workflow group's forgets: a tombstone per request and decision) are signed
# by a child process on another core while this one stores them (tombstones/signing_process.py); off: every
# signature is made in this process.
LEDGER_TOMBSTONE_SIGNING_PROCESS = env.bool("LEDGER_TOMBSTONE_SIGNING_PROCESS", default=True)
# The log's unique name: the first line of every checkpoint and `log_origin` in every statement.
LEDGER_LOG_ORIGIN = env.str("LEDGER_LOG_ORIGIN", default="forgetting-ledger.localhost/tombstones")
# Public verification endpoints: at most this many requests per client address per window (seconds).
LEDGER_VERIFY_RATE_LIMIT = env.int("LEDGER_VERIFY_RATE_LIMIT", default=30)
LEDGER_VERIFY_RATE_WINDOW = env.int("LEDGER_VERIFY_RATE_WINDOW", default=60)
LEDGER_PUBLIC_API_RATE_LIMIT = env.int("LEDGER_PUBLIC_API_RATE_LIMIT", default=120)

# --- dsr ---
# Days to answer a subject request under a regulation other than GDPR and CCPA (and what its one
# extension adds): dsr/deadlines.py.
LEDGER_DSR_OTHER_DAYS = env.int("LEDGER_DSR_OTHER_DAYS", default=30)

# --- alerts ---
# A subject request with work left raises an alert this many days before its (effective) due date.
LEDGER_ALERT_DEADLINE_DAYS = env.int("LEDGER_ALERT_DEADLINE_DAYS", default=5)
# Webhook deliveries: the timeout of one attempt (seconds), how many retries follow a failed one, and the first
# backoff (seconds, doubled at each retry, at most an hour; with jitter: a random wait up to that).
LEDGER_ALERT_WEBHOOK_TIMEOUT = env.float("LEDGER_ALERT_WEBHOOK_TIMEOUT", default=5.0)
LEDGER_ALERT_WEBHOOK_RETRIES = env.int("LEDGER_ALERT_WEBHOOK_RETRIES", default=5)
LEDGER_ALERT_WEBHOOK_BACKOFF = env.int("LEDGER_ALERT_WEBHOOK_BACKOFF", default=30)
LEDGER_ALERT_WEBHOOK_JITTER = env.bool("LEDGER_ALERT_WEBHOOK_JITTER", default=True)
# Where the admin is reached from outside, for the links in alert mails and webhook bodies (by default where the
# public pages are: serve_embedded sets that to the port it serves on).
LEDGER_ALERT_ADMIN_URL = env.str("LEDGER_ALERT_ADMIN_URL", default=LEDGER_PUBLIC_URL)
