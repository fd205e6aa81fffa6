"""A worker, once up, opens its signing keys, starts its tombstone signing process where its tasks run, and moves
what it built at start-up out of the garbage collector's walks (config/celery.py)."""
import gc

import pytest
from celery.signals import worker_process_init, worker_ready

from tombstones.services import keys

pytestmark = pytest.mark.django_db
SIGNALS = pytest.mark.parametrize("signal", [worker_ready, worker_process_init], ids=["solo pool ready", "prefork child"])


@SIGNALS
def test_a_started_worker_leaves_its_long_lived_objects_out_of_full_collections(signal):
    import config.celery  # noqa: F401  (connects the handlers)

    gc.unfreeze()
    try:
        signal.send(sender=None)
        assert gc.get_freeze_count() > 10_000  # Django and the apps: ~100,000 objects
    finally:
        gc.unfreeze()


@SIGNALS
def test_a_started_worker_has_opened_the_current_signing_keys_before_its_first_forget(signal, monkeypatch):
    import config.celery  # noqa: F401

    current = {purpose: keys.key_current(purpose=purpose) for purpose in keys.KeyPurpose.values}
    monkeypatch.setattr(keys, "_private_keys", {})
    try:
        signal.send(sender=None)
    finally:
        gc.unfreeze()
    opened = {kid for kid, _ in keys._private_keys}
    assert opened == {key.kid for key in current.values()}


@SIGNALS
def test_a_started_worker_runs_its_signing_process_with_the_current_key(signal, no_signing_process):
    import config.celery  # noqa: F401

    current = keys.key_current(purpose=keys.KeyPurpose.TOMBSTONE)
    try:
        signal.send(sender=None)
    finally:
        gc.unfreeze()
    process = no_signing_process._signing
    assert process is not None and process.process.poll() is None
    assert process.public_key == bytes(current.public_key)
    assert not no_signing_process._signing_lock.locked()


def test_the_parent_of_a_prefork_worker_starts_no_signing_process(no_signing_process):
    """Its children run the tasks (each starts its own at worker_process_init)."""
    from celery.concurrency.prefork import TaskPool

    import config.celery  # noqa: F401

    keys.key_current(purpose=keys.KeyPurpose.TOMBSTONE)
    consumer = type("Consumer", (), {"pool": TaskPool.__new__(TaskPool)})()
    try:
        worker_ready.send(sender=consumer)
    finally:
        gc.unfreeze()
    assert no_signing_process._signing is None
