"""A migration's CONCURRENTLY index build (memory 0014, 0016) run in a thread while a test holds a write open."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psycopg
from django.db import connection

WAITING = "waiting for writers before build"


def build_behind(writer: psycopg.Connection, index_build: Callable) -> tuple[threading.Thread, list]:
    """`index_build(schema_editor)` in a thread of its own, once it waits for `writer`'s open transaction (as a
    CONCURRENTLY build waits for the writes begun before it); the thread's error, if any, in the list."""
    errors: list[BaseException] = []

    def build():
        try:
            with connection.schema_editor(atomic=False) as editor:
                index_build(editor)
        except BaseException as error:  # noqa: BLE001 - reported to the test
            errors.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=build)
    thread.start()
    deadline = time.monotonic() + 30
    while not waiting():
        assert thread.is_alive() and time.monotonic() < deadline, f"the build never waited: {errors}"
        time.sleep(0.05)
    return thread, errors


def waiting() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_stat_progress_create_index WHERE phase = %s AND datname = current_database()",
                       [WAITING])
        return cursor.fetchone() is not None


def build_cancel() -> None:
    """Cancels the build that waits (as an operator's Ctrl-C or a server stopping would cut it short)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_cancel_backend(pid) FROM pg_stat_progress_create_index WHERE phase = %s "
                       "AND datname = current_database()", [WAITING])
