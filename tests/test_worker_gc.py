"""A worker moves what it built at start-up out of the garbage collector's walks (config/celery.py)."""
import gc

import pytest
from celery.signals import worker_process_init, worker_ready


@pytest.mark.parametrize("signal", [worker_ready, worker_process_init], ids=["solo pool ready", "prefork child"])
def test_a_started_worker_leaves_its_long_lived_objects_out_of_full_collections(signal):
    import config.celery  # noqa: F401  (connects the handlers)

    gc.unfreeze()
    try:
        signal.send(sender=None)
        assert gc.get_freeze_count() > 10_000  # Django and the apps: ~100,000 objects
    finally:
        gc.unfreeze()
