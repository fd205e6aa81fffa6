"""Tasks of the project as a whole (not of one app). Only the health check's ping lives here."""
from celery import shared_task

PING_TASK = "config.ping"


@shared_task(name=PING_TASK, ignore_result=False, acks_late=True)
def ping(nonce: str = "") -> str:
    """Answer `pong:<nonce>`: proves that a worker took a message off the broker and ran it.

    The only task that keeps its result (CELERY_TASK_IGNORE_RESULT is on): /healthz?worker=1 waits for it.
    """
    return f"pong:{nonce}"
