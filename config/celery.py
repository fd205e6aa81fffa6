"""The Celery app. The beat schedule lives in the database (django-celery-beat), editable in the admin."""
import gc
import logging
import os

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_process_init, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
logger = logging.getLogger(__name__)

# config.tasks is not an app's module, so autodiscovery would not find it.
app = Celery("ledger", include=["config.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def database_connections_recycle(sender=None, **kwargs):
    """Django's request rules for the worker's database connections, before and after each task: a connection
    that is past CONN_MAX_AGE (0 by default: every one), or broke, is closed; one that is kept is checked before
    its next use when CONN_HEALTH_CHECKS is on (settings: CELERY_DB_REUSE_MAX). Not for a task run eagerly,
    inside its caller's transaction."""
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return
    from django.db import close_old_connections

    close_old_connections()


@worker_ready.connect
@worker_process_init.connect
def worker_warm(sender=None, **kwargs):
    """Once a worker is up (the solo pool's process when it is ready; each prefork child when it starts): the
    signing keys opened, the tombstone signing process started where tasks run, and what the process has
    built so far frozen."""
    signing_keys_open(start_signing_process=not _prefork_parent(sender))
    objects_freeze()


def _prefork_parent(sender) -> bool:
    """`worker_ready` of a prefork worker fires in its parent, which runs no task: a signing process started
    there would serve nobody (and its forked children would hold its pipe open)."""
    pool = getattr(sender, "pool", None)
    return pool is not None and type(pool).__module__.endswith(".prefork")


def signing_keys_open(*, start_signing_process: bool = False) -> None:
    """Decrypt the current signing keys now (scrypt: ~0.1 s a key, twice that under load; cached for the life
    of the process), not in the first forget and the first receipt a worker makes, which would wait for it;
    and, with `start_signing_process`, start the process that signs batches of tombstones (~0.1 s, else in
    the first batch). Only keys that exist are opened (the first forget creates a missing one, as before); a
    worker whose database or passphrase is not ready starts anyway, and the first forget reports the problem."""
    from django.db import DatabaseError, connection

    from tombstones.errors import TombstoneError
    from tombstones.models import KeyPurpose, SigningKey
    from tombstones.services.issue import signing_process_warm
    from tombstones.services.keys import key_current, key_private

    try:
        for purpose in SigningKey.objects.filter(retired_at__isnull=True).values_list("purpose", flat=True):
            key = key_current(purpose=purpose)
            key_private(key)
            if start_signing_process and purpose == KeyPurpose.TOMBSTONE:
                signing_process_warm(key)
    except (DatabaseError, TombstoneError) as exc:
        logger.warning("signing keys not opened at start (%s); the first forget opens them", exc)
    finally:
        # The tasks open theirs under their own rules (`database_connections_recycle`); a caller's transaction
        # (a test's) is left alone.
        if not connection.in_atomic_block:
            connection.close()


def objects_freeze() -> None:
    """Move what the process has built so far (Django, the apps, their modules and settings, the opened keys:
    ~100,000 objects) out of the garbage collector's reach: they live as long as the process, and every full
    collection walked them all again. In bench_workflow.py the collector cost 0.5-1.4 ms of CPU a request,
    0.3 with this."""
    gc.freeze()
