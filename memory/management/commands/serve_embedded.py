"""`python manage.py serve_embedded`: the whole service on the embedded default, in one command.

Migrates, loads the demo data set (idempotent), resets an admin login and an operator login (a staff user in
the operator role's group: dsr/roles.py) and issues an agent, a legal and an operator API token (all
printed), then runs two children with the same environment: a real Celery worker (with beat, the
scheduled sweeps) and the Django web server. Ctrl-C or SIGTERM stops both; when either child dies the
other is stopped and the command exits non-zero.

The children run in process groups of their own, so a terminal's Ctrl-C reaches only this process,
which then stops each child exactly once (SIGTERM: Celery's warm shutdown; then SIGKILL after
STOP_GRACE seconds). On Linux a child also gets SIGTERM if this process is killed outright.
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.checks import Tags
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.utils import timezone

from memory.models import ArtifactKind, DerivedArtifact, Record, Tenant
from memory.services import artifact_write, record_write, subject_get_or_create
from memory.services.tokens import tenant_get_or_create, token_issue
from retention.models import ContentClass, LegalHold, RetentionRule, RuleKind, RuleMode, RuleProtects
from retention.services import content_class_create, hold_place, rule_create

# Seconds a child gets to stop after SIGTERM (a worker finishes its current task) before SIGKILL.
STOP_GRACE = 20
# Seconds to wait for the web server to answer /healthz before saying that it is slow to start.
READY_WAIT = 60
POLL = 0.2

DEMO_TENANT = "demo"
DEMO_ACTOR = "system:serve_embedded"
DEMO_HOLD_MATTER = "Demo Holdings v. Example Corp (litigation hold)"
DEMO_HELD_SUBJECT = "cust-1003"
SEVEN_YEARS = 7 * 365 + 2  # days, leap days included
CHAT_LINES = [
    "Asked how to change the delivery address on an open order.",
    "Wants the premium plan's fee schedule sent by post.",
    "Reported that the mobile app logs out after every update.",
    "Prefers to be contacted in the evening, never on weekends.",
    "Mentioned a move to Lisbon next spring; asked about international transfers.",
    "Complained about a duplicate charge on the last statement.",
]
TRADE_LINES = [
    "BUY 100 ACME @ 41.20, settled T+1, account {account}",
    "SELL 250 GLOBEX @ 12.05, settled T+1, account {account}",
    "BUY 40 INITECH @ 188.10, limit order filled, account {account}",
]


def _child_setup() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: deliver SIGTERM to the child when this process dies (even by SIGKILL)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def _group_signal(pgid: int, signum: int) -> bool:
    """Send `signum` to a process group (0: only ask whether it still has a process); False when it has none."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    return True


class Command(BaseCommand):
    help = ("Run the service on the embedded default (SQLite, Kombu's filesystem broker): migrate, load the "
            "demo data, print an admin login and API tokens, run a Celery worker and the web server.")

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--admin-username", default="admin")
        parser.add_argument("--admin-password", default=None,
                            help="The admin's password (default: a new random one at each start).")
        parser.add_argument("--operator-username", default="operator",
                            help="An operator's login (the operator role: triage and run subject requests).")
        parser.add_argument("--no-demo", action="store_true", help="Do not load the demo data set.")
        parser.add_argument("--no-beat", action="store_true",
                            help="Run the worker without the beat scheduler (no scheduled sweeps).")

    def handle(self, *args, host, port, admin_username, admin_password, operator_username, no_demo, no_beat,
               **options):
        if hasattr(sys.stdout, "reconfigure"):
            sys.stdout.reconfigure(line_buffering=True)
        call_command("migrate", interactive=False, verbosity=1)
        # What only the database can tell (vectors of another embedder, memory.W002): called commands skip checks.
        self.check(tags=[Tags.database], databases=[DEFAULT_DB_ALIAS])
        if not no_demo:
            self.stdout.write(self._demo_load())
        password = self._admin_reset(admin_username, admin_password)
        operator_password = self._operator_reset(operator_username)
        _, agent_key = token_issue(tenant_name=DEMO_TENANT, role="agent")
        _, legal_key = token_issue(tenant_name=DEMO_TENANT, role="legal")
        _, operator_key = token_issue(tenant_name=DEMO_TENANT, role="operator")
        connections.close_all()  # the children open their own; hold no SQLite handle meanwhile

        base = f"http://{host}:{port}"
        self._banner(base, admin_username, password, agent_key, legal_key,
                     operator=(operator_username, operator_password, operator_key))
        # From here on a signal means "stop the children, then exit" (until here it simply interrupts).
        self._signals = 0
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, self._on_signal)
        children = self._start(host=host, port=port, beat=not no_beat)
        try:
            died = self._supervise(children, base)
        finally:
            self._stop(children)
        if died:
            name, code = died
            raise CommandError(f"the {name} exited with code {code}; stopped the rest.", returncode=1)
        self.stdout.write("Stopped: worker and web server are gone.")

    # --- signals and children --------------------------------------------------------------------

    def _on_signal(self, signum, frame):
        self._signals += 1

    def _start(self, *, host: str, port: int, beat: bool) -> dict[str, subprocess.Popen]:
        # The same settings module and var dir as this process (manage.py set DJANGO_SETTINGS_MODULE).
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "LEDGER_VAR_DIR": str(settings.VAR_DIR)}
        # The links mailed to subjects must reach this server as it runs (another --port included), unless
        # the operator said where the public page lives.
        env.setdefault("LEDGER_PUBLIC_URL", f"http://{host}:{port}")
        base_dir = Path(settings.BASE_DIR)
        worker = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo", "--loglevel=info",
                  "--hostname=embedded@%h", "--without-gossip", "--without-mingle"]
        if beat:
            worker.append("--beat")
        web = [sys.executable, str(base_dir / "manage.py"), "runserver", f"{host}:{port}", "--noreload",
               "--insecure"]  # --insecure: serve the admin's static files with DEBUG off
        children = {}
        for name, argv in (("worker", worker), ("web server", web)):
            children[name] = subprocess.Popen(argv, cwd=base_dir, env=env, stdin=subprocess.DEVNULL,
                                              process_group=0, preexec_fn=_child_setup)
            self.stdout.write(f"started the {name}: pid {children[name].pid}")
        return children

    def _supervise(self, children: dict[str, subprocess.Popen], base: str) -> tuple[str, int] | None:
        """Run until a signal arrives (None) or a child exits (its name and exit code)."""
        started, probing = time.monotonic(), True
        while not self._signals:
            for name, proc in children.items():
                if proc.poll() is not None:
                    return name, proc.returncode
            if probing:
                health = self._health(base)
                if health is not None and health.get("status") == "ok":
                    self.stdout.write(self.style.SUCCESS(
                        f"Ready: {json.dumps(health)}\n"
                        f"Open {base}/admin/ (Ctrl-C stops the worker and the web server)."))
                    probing = False
                elif time.monotonic() - started > READY_WAIT:
                    self.stderr.write(f"not healthy after {READY_WAIT} s: {json.dumps(health)}; still running.")
                    probing = False
            time.sleep(POLL)
        return None

    def _health(self, base: str) -> dict | None:
        """The answer of /healthz?worker=1 (which runs a task on the worker), or None if nobody listens yet."""
        try:
            with urllib.request.urlopen(f"{base}/healthz?worker=1", timeout=30) as answer:
                return json.load(answer)
        except urllib.error.HTTPError as exc:  # 503: some check failed
            try:
                return json.loads(exc.read() or b"{}")
            except ValueError:
                return {"status": "error", "http_status": exc.code}
        except OSError:
            return None

    def _stop(self, children: dict[str, subprocess.Popen]) -> None:
        """SIGTERM to each child's whole process group, then SIGKILL to what is left after STOP_GRACE (or at
        another Ctrl-C). The group, not the child alone: the worker's beat scheduler is a process of its own
        (Celery forks it), and a worker killed outright leaves it running, still sending scheduled sweeps."""
        for name, proc in children.items():
            if _group_signal(proc.pid, signal.SIGTERM):
                self.stdout.write(f"stopping the {name} (pid {proc.pid})")
        signals_before = self._signals
        deadline = time.monotonic() + STOP_GRACE
        for name, proc in children.items():
            while proc.poll() is None or _group_signal(proc.pid, 0):
                # Another Ctrl-C (or the grace running out) kills what is left.
                if time.monotonic() > deadline or self._signals > signals_before:
                    self.stderr.write(f"killing what is left of the {name} (process group {proc.pid})")
                    _group_signal(proc.pid, signal.SIGKILL)
                    proc.wait()
                    break
                time.sleep(POLL)

    # --- set-up ----------------------------------------------------------------------------------

    def _banner(self, base, username, password, agent_key, legal_key, *, operator) -> None:
        operator_username, operator_password, operator_key = operator
        db = settings.DATABASES["default"]
        database = (f"SQLite {db['NAME']}" if connection.vendor == "sqlite"
                    else f"{connection.vendor} (DATABASE_URL)")
        broker = settings.CELERY_BROKER_URL.split("://", 1)[0] + "://"
        if broker == "filesystem://":
            broker += f" in {Path(settings.VAR_DIR) / 'broker'}"
        self.stdout.write("\n".join([
            "",
            "Forgetting Ledger, embedded",
            f"  database:     {database}",
            f"  broker:       {broker}",
            f"  admin:        {base}/admin/",
            f"  username:     {username}",
            f"  password:     {password}",
            f"  API schema:   {base}/api/schema/",
            f"  health:       {base}/healthz?worker=1",
            f"  agent token:  {agent_key}",
            f"  legal token:  {legal_key}",
            f"  operator login:     {operator_username}",
            f"  operator password:  {operator_password}",
            f"  operator token:     {operator_key}",
            "  try:",
            f"    curl -H 'Authorization: Token {agent_key}' '{base}/api/v1/memory/records?scope=user:1'",
            f"    curl -H 'Authorization: Token {legal_key}' '{base}/api/v1/retention/rules'",
            f"    curl -X POST -H 'Authorization: Token {operator_key}' -H 'Content-Type: application/json' "
            f"""-d '{{"subject": "cust-1001", "type": "access", "regulation": "gdpr", "channel": "email"}}' """
            f"'{base}/api/v1/requests'",
            "",
        ]))

    def _admin_reset(self, username: str, password: str | None) -> str:
        password = password or secrets.token_urlsafe(12)
        user, _ = get_user_model().objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = user.is_active = True
        user.set_password(password)
        user.save()
        return password

    def _operator_reset(self, username: str) -> str:
        """A staff user in the operator group (not a superuser): what an operator sees and may do. A new
        password at each start, as the admin's."""
        from django.contrib.auth.models import Group

        from dsr.roles import roles_sync

        if not Group.objects.filter(name="operator").exists():
            roles_sync()  # the groups are made by dsr migration 0003; a flushed database lost them
        password = secrets.token_urlsafe(12)
        user, _ = get_user_model().objects.get_or_create(username=username)
        user.is_staff = user.is_active = True
        user.is_superuser = False
        # Alerts are mailed to the operators (alerts.services); in the embedded default they land in var/mail.
        user.email = user.email or f"{username}@example.org"
        user.set_password(password)
        user.save()
        user.groups.set([Group.objects.get(name="operator")])
        return password

    def _demo_load(self) -> str:
        """The demo data set, through the services; each part is skipped when it is there already."""
        with transaction.atomic():
            tenant = tenant_get_or_create(name=DEMO_TENANT)
            chat = self._content_class(tenant, "chat", "Conversations between agents and customers.")
            ledger = self._content_class(tenant, "trade-ledger", "Executed trades (broker-dealer books and records).")
            self._rule(tenant, ledger, kind=RuleKind.REGULATORY, duration_days=SEVEN_YEARS, authority="SEC 17a-4",
                       mode=RuleMode.COMPLIANCE, protects=RuleProtects.CONTENT)
            self._rule(tenant, chat, kind=RuleKind.PACT, duration_days=90, authority="customer pact §4.2",
                       mode=RuleMode.GOVERNANCE, protects=RuleProtects.EXISTENCE)
            written = 0 if Record.objects.filter(tenant=tenant).exists() else self._demo_records(tenant)
            if not LegalHold.objects.filter(tenant=tenant, matter=DEMO_HOLD_MATTER).exists():
                hold_place(tenant=tenant, matter=DEMO_HOLD_MATTER, authority="FRCP 37(e)", actor=DEMO_ACTOR,
                           subject=subject_get_or_create(tenant=tenant, ref=DEMO_HELD_SUBJECT))
            if not DerivedArtifact.objects.filter(tenant=tenant, kind=ArtifactKind.SUMMARY).exists():
                sources = list(Record.objects.filter(
                    tenant=tenant, scope__path="user:2/session:1", content_class=chat, forgotten_at__isnull=True,
                    redacted_at__isnull=True).order_by("pk").values_list("pk", flat=True))
                if sources:  # none left if someone forgot them: then there is nothing to summarize
                    artifact_write(tenant=tenant, kind=ArtifactKind.SUMMARY, source_ids=sources,
                                   content="Customer 1002 asked about fees and delivery; follow up by post.")
            total = Record.objects.filter(tenant=tenant).count()
        if written:
            return f"demo data: loaded tenant {DEMO_TENANT!r} with {written} records."
        return f"demo data: tenant {DEMO_TENANT!r} already loaded ({total} records)."

    def _content_class(self, tenant: Tenant, name: str, description: str) -> ContentClass:
        existing = ContentClass.objects.filter(tenant=tenant, name=name).first()
        return existing or content_class_create(tenant=tenant, name=name, description=description, actor=DEMO_ACTOR)

    def _rule(self, tenant: Tenant, content_class: ContentClass, *, authority: str, **fields) -> None:
        if not RetentionRule.objects.filter(content_class=content_class, authority=authority,
                                            retired_at__isnull=True).exists():
            rule_create(tenant=tenant, content_class=content_class, authority=authority, actor=DEMO_ACTOR, **fields)

    def _demo_records(self, tenant: Tenant) -> int:
        """32 records: 4 subjects (user:1..4), 2 sessions each, 3 chat lines and 1 trade each.

        user:1/session:1's chats are 120 days old: their 90-day pact has run out, so they can be hard-forgotten;
        the trades are under SEC 17a-4 for 7 years; everything of cust-1003 is under the legal hold.
        """
        now = timezone.now()
        written = 0
        for user in range(1, 5):
            subject = f"cust-{1000 + user}"
            for session in range(1, 3):
                scope = f"user:{user}/session:{session}"
                age = timedelta(days=120) if (user, session) == (1, 1) else timedelta(days=user + session)
                for line in range(3):
                    record_write(tenant=tenant, scope_path=scope, subject_ref=subject, content_class_name="chat",
                                 content=CHAT_LINES[(user + session + line) % len(CHAT_LINES)],
                                 tags=["demo", "support"], created_at=now - age + timedelta(minutes=line))
                    written += 1
                trade = TRADE_LINES[(user + session) % len(TRADE_LINES)].format(account=f"A-{1000 + user}")
                record_write(tenant=tenant, scope_path=scope, subject_ref=subject, content_class_name="trade-ledger",
                             content=trade, tags=["demo"], tier="warm", created_at=now - age + timedelta(minutes=5))
                written += 1
        return written
