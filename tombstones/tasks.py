"""Celery tasks of the tombstones app."""
from celery import shared_task

from .services import checkpoint_sign


@shared_task(name="tombstones.checkpoint_sign", acks_late=True)
def checkpoint_sign_task() -> int:
    """Sign a checkpoint of the log if it grew since the last one; schedule it every minute or so (beat),
    so that every tombstone soon has a checkpoint that dates it (what key-compromise checks rely on)."""
    return checkpoint_sign().tree_size
