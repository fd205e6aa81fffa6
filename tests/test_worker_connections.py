"""The worker's database connections follow Django's request rules around each task (config/celery.py), not
Celery's fixup, which closes them after every task whatever CONN_MAX_AGE says: a kept connection saves each
delivery a new PostgreSQL backend."""
import time
from types import SimpleNamespace

import pytest
from django.db import connection, transaction

from config.celery import app, database_connections_recycle

TASK = SimpleNamespace(request=SimpleNamespace(is_eager=False))
EAGER_TASK = SimpleNamespace(request=SimpleNamespace(is_eager=True))


def test_celery_closes_connections_only_every_so_many_tasks(settings):
    assert app.conf.get("CELERY_DB_REUSE_MAX") == settings.CELERY_DB_REUSE_MAX >= 100


@pytest.mark.django_db(transaction=True)
def test_a_connection_within_conn_max_age_is_kept_from_task_to_task():
    connection.ensure_connection()
    kept = connection.connection
    connection.close_at = time.monotonic() + 600  # what CONN_MAX_AGE=600 sets when it connects

    database_connections_recycle(sender=TASK)

    assert connection.connection is kept
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    assert connection.connection is kept


@pytest.mark.django_db(transaction=True)
def test_with_the_default_conn_max_age_the_connection_is_closed_after_each_task():
    connection.ensure_connection()
    connection.close_at = time.monotonic()  # CONN_MAX_AGE = 0 (Django's default)

    database_connections_recycle(sender=TASK)

    assert connection.connection is None


@pytest.mark.django_db(transaction=True)
def test_a_broken_connection_is_replaced_before_the_next_task():
    connection.ensure_connection()
    connection.close_at = time.monotonic() + 600
    connection.errors_occurred = True
    connection.connection.close()  # the server went away under it

    database_connections_recycle(sender=TASK)

    assert connection.connection is None


@pytest.mark.django_db
def test_a_task_run_eagerly_inside_its_callers_transaction_leaves_the_connection_alone():
    with transaction.atomic():
        kept = connection.connection
        database_connections_recycle(sender=EAGER_TASK)
        assert connection.connection is kept and connection.in_atomic_block
