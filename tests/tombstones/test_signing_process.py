"""The signing process that signs large batches beside the issuing one (tombstones/signing_process.py): the
same signatures as signing here, every answer checked, and a batch that completes, correctly signed, whatever
happens to it. A real child process throughout (`python -m tombstones.signing_process`), never a stand-in."""
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.db import transaction
from django.utils import timezone

from tombstones.dsse import PAYLOAD_TYPE, pae
from tombstones.merkle import leaf_hash
from tombstones.models import SigningKey, Tombstone
from tombstones.services import TombstoneRequest, tombstones_issue_many
from tombstones.services import issue as issue_service
from tombstones.services import keys as keys_service
from tombstones.signing_process import SigningProcess, SigningProcessError

from .factories import statement_make, tombstone_make

BATCH = issue_service.SIGNING_PROCESS_MIN + 2 * issue_service.SUBMIT_EVERY + 5  # several frames, one partial


@pytest.fixture(autouse=True)
def own_signing_process(no_signing_process):
    """Each test starts without a signing process and leaves none behind (tests/conftest.py)."""


def _messages(count: int) -> list[bytes]:
    return [pae(PAYLOAD_TYPE, b'{"n":%d,"pad":"%s"}' % (n, b"x" * (n % 700))) for n in range(count)]


def _keyed(private: Ed25519PrivateKey) -> SigningProcess:
    process = SigningProcess()
    process.key(private.private_bytes_raw(), private.public_key().public_bytes_raw())
    return process


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


def test_the_process_makes_the_signatures_this_process_makes_in_order():
    private = Ed25519PrivateKey.generate()
    messages = _messages(150)
    process = _keyed(private)
    try:
        for start in range(0, 150, 32):
            process.submit(messages[start:start + 32], [leaf_hash(m) for m in messages[start:start + 32]])
        assert process.pending == 150
        taken = process.take(10) + process.take(140)
    finally:
        process.close()
    assert taken == [private.sign(message) for message in messages]  # Ed25519 is deterministic
    assert process.pending == 0


def test_an_answer_for_another_message_is_refused_and_the_process_closed():
    private = Ed25519PrivateKey.generate()
    messages = _messages(3)
    process = _keyed(private)
    process.submit(messages, [leaf_hash(messages[0]), leaf_hash(messages[2]), leaf_hash(messages[1])])
    assert process.take(1) == [private.sign(messages[0])]
    with pytest.raises(SigningProcessError, match="another message"):
        process.take(2)
    assert process.process.wait(timeout=5) == 0


def test_a_process_holding_another_key_than_asked_is_refused():
    private, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    process = SigningProcess()
    with pytest.raises(SigningProcessError, match="another public key"):
        process.key(private.private_bytes_raw(), other.public_key().public_bytes_raw())
    assert process.process.wait(timeout=5) == 0


def test_a_dead_process_is_an_error_not_a_hang():
    process = _keyed(Ed25519PrivateKey.generate())
    process.process.kill()
    process.process.wait()
    with pytest.raises(SigningProcessError):
        messages = _messages(40)
        process.submit(messages, [leaf_hash(m) for m in messages])
        process.take(40)


def test_the_process_exits_when_its_parent_is_killed():
    """Its input ends with the parent's death: no signing process (with a key in memory) outlives its user."""
    root = Path(issue_service.__file__).resolve().parents[2]
    parent = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         "from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey\n"
         "from tombstones.signing_process import SigningProcess\n"
         "private = Ed25519PrivateKey.generate(); child = SigningProcess()\n"
         "child.key(private.private_bytes_raw(), private.public_key().public_bytes_raw())\n"
         "print(child.process.pid, flush=True); time.sleep(120)"],
        cwd=root, stdout=subprocess.PIPE, text=True)
    child_pid = int(parent.stdout.readline())
    assert _alive(child_pid)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while _alive(child_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child_pid)


def _requests(tenant, count: int) -> list[TombstoneRequest]:
    return [TombstoneRequest(tombstone_id=uuid.uuid4(), tenant_id=tenant.id, statement=statement,
                             subject_salts=salts if index % 2 else None)
            for index, (statement, salts) in enumerate(statement_make() for _ in range(count))]


def _assert_signed_as_here(requests: list[TombstoneRequest], key: SigningKey) -> None:
    """Every stored signature verifies, and is the very signature this process makes of that payload."""
    private = keys_service.key_private(key)
    public = Ed25519PublicKey.from_public_bytes(bytes(key.public_key))
    stored = Tombstone.objects.in_bulk([request.tombstone_id for request in requests])
    assert len(stored) == len(requests)
    for tombstone in stored.values():
        message = pae(PAYLOAD_TYPE, bytes(tombstone.payload))
        assert tombstone.key_id == key.pk
        public.verify(bytes(tombstone.signature), message)
        assert bytes(tombstone.signature) == private.sign(message)


def _issue(requests):
    with transaction.atomic():
        return tombstones_issue_many(requests=requests)


def test_a_large_batch_is_signed_by_the_process_with_the_signatures_made_here(tenant):
    key = SigningKey.objects.get(pk=tombstone_make(tenant).key_id)
    requests = _requests(tenant, BATCH)
    _issue(requests)
    process = issue_service._signing
    assert process is not None and _alive(process.process.pid) and process.pending == 0
    _assert_signed_as_here(requests, key)
    # And the next batch uses the same process, keyed already
    more = _requests(tenant, BATCH)
    _issue(more)
    assert issue_service._signing is process
    _assert_signed_as_here(more, key)


def test_a_small_batch_and_a_switched_off_process_sign_here(tenant, settings):
    key = SigningKey.objects.get(pk=tombstone_make(tenant).key_id)
    small = _requests(tenant, issue_service.SIGNING_PROCESS_MIN - 1)
    _issue(small)
    assert issue_service._signing is None
    settings.LEDGER_TOMBSTONE_SIGNING_PROCESS = False
    large = _requests(tenant, BATCH)
    _issue(large)
    assert issue_service._signing is None
    _assert_signed_as_here(small + large, key)


def test_a_process_killed_in_the_middle_of_a_batch_leaves_the_rest_to_this_process(tenant, monkeypatch, caplog):
    """SIGKILL once a third of the batch's statements are made: the batch completes, every signature right,
    and this process stops using the dead one (a new one is tried after SIGNING_PROCESS_RETRY_SECONDS)."""
    key = SigningKey.objects.get(pk=tombstone_make(tenant).key_id)
    made = []
    original = issue_service.statement_payload

    def payload_then_kill(**kwargs):
        made.append(1)
        if len(made) == BATCH // 3:
            issue_service._signing.process.send_signal(signal.SIGKILL)
            issue_service._signing.process.wait()
        return original(**kwargs)

    monkeypatch.setattr(issue_service, "statement_payload", payload_then_kill)
    requests = _requests(tenant, BATCH)
    with caplog.at_level(logging.WARNING, logger="tombstones.services.issue"):
        _issue(requests)
    _assert_signed_as_here(requests, key)
    assert issue_service._signing is None and issue_service._signing_retry_at > time.monotonic()
    assert "signing in this process" in caplog.text
    # Until the retry time, batches sign here, and correctly
    monkeypatch.setattr(issue_service, "statement_payload", original)
    later = _requests(tenant, BATCH)
    _issue(later)
    assert issue_service._signing is None
    _assert_signed_as_here(later, key)


def test_a_signature_that_does_not_verify_is_never_stored(tenant, monkeypatch, caplog):
    """The first signature the process answers in each batch is verified before anything is written with it:
    a process that signs with the wrong key (or wrongly) is dropped, and the batch signed here."""
    key = SigningKey.objects.get(pk=tombstone_make(tenant).key_id)
    wrong = Ed25519PrivateKey.generate()
    original_take = SigningProcess.take

    def take_wrongly(self, count):
        return [wrong.sign(b"something else") for _ in original_take(self, count)]

    monkeypatch.setattr(SigningProcess, "take", take_wrongly)
    requests = _requests(tenant, BATCH)
    with caplog.at_level(logging.WARNING, logger="tombstones.services.issue"):
        _issue(requests)
    assert "does not verify" in caplog.text
    _assert_signed_as_here(requests, key)


def test_a_rotation_elsewhere_seen_under_the_lock_signs_the_batch_with_the_new_key(tenant):
    """The process signs with the key this process last saw; a rotation by another process, seen under the
    log's lock, has the whole batch signed again with the new key, and the process then holds the new key."""
    old = SigningKey.objects.get(pk=tombstone_make(tenant).key_id)
    _issue(_requests(tenant, BATCH))  # the process now holds the old key
    with transaction.atomic():
        SigningKey.objects.filter(pk=old.pk).update(retired_at=timezone.now())
        new = keys_service._key_create(purpose=old.purpose, actor="another process", now=timezone.now())
    keys_service._current_keys[old.purpose] = old
    rotated = _requests(tenant, BATCH)
    _issue(rotated)
    _assert_signed_as_here(rotated, new)
    assert issue_service._signing.pending == 0
    after = _requests(tenant, BATCH)
    _issue(after)
    assert issue_service._signing.public_key == bytes(new.public_key)
    _assert_signed_as_here(after, new)


def test_a_batch_of_ids_issued_before_leaves_no_answer_pending(tenant):
    """Reissued ids return the stored tombstones before the signatures are used: the answers the process
    still owes are drained, so the next batch's signatures are its own."""
    key = SigningKey.objects.get(pk=tombstone_make(tenant).key_id)
    requests = _requests(tenant, BATCH)
    _issue(requests)
    again = _issue(requests)
    assert [t.tombstone_id for t in again] == [r.tombstone_id for r in requests]
    assert issue_service._signing.pending == 0
    fresh = _requests(tenant, BATCH)
    _issue(fresh)
    _assert_signed_as_here(requests + fresh, key)


def test_a_forked_copy_of_the_handle_is_not_used(tenant, monkeypatch):
    """After a fork (a prefork worker's child) the handle belongs to the parent: the child starts its own."""
    key = SigningKey.objects.get(pk=tombstone_make(tenant).key_id)
    _issue(_requests(tenant, BATCH))
    inherited = issue_service._signing
    inherited.pid_owner = -1  # as a forked child sees it: another process's handle
    try:
        requests = _requests(tenant, BATCH)
        _issue(requests)
        assert issue_service._signing is not inherited and issue_service._signing.pid_owner == os.getpid()
        _assert_signed_as_here(requests, key)
    finally:
        inherited.close()


def test_a_batch_that_finds_the_process_in_use_by_another_thread_signs_here(tenant):
    key = SigningKey.objects.get(pk=tombstone_make(tenant).key_id)
    assert issue_service._signing_lock.acquire(blocking=False)  # another thread's batch holds it
    try:
        requests = _requests(tenant, BATCH)
        _issue(requests)
        assert issue_service._signing is None
    finally:
        issue_service._signing_lock.release()
    _assert_signed_as_here(requests, key)


def test_a_refused_batch_leaves_the_process_free_and_nothing_pending(tenant):
    """A tenant that does not exist is refused under the log's lock, after the signing began: the process's
    lock is released and its answers drained, so the next batch uses it."""
    from tombstones.errors import TombstoneError

    key = SigningKey.objects.get(pk=tombstone_make(tenant).key_id)
    refused = [TombstoneRequest(tombstone_id=uuid.uuid4(), tenant_id=tenant.id + 10_000, statement=statement_make()[0])
               for _ in range(BATCH)]
    with pytest.raises(TombstoneError) as refusal:
        _issue(refused)
    assert refusal.value.code == "tenant_not_found"
    assert not issue_service._signing_lock.locked() and issue_service._signing.pending == 0
    assert not Tombstone.objects.filter(pk__in=[r.tombstone_id for r in refused]).exists()
    requests = _requests(tenant, BATCH)
    _issue(requests)
    _assert_signed_as_here(requests, key)


def test_a_statement_refused_in_the_middle_of_a_batch_leaves_nothing_pending(tenant):
    """The signing process has frames of the batch's first statements when a later one is refused: their
    answers are drained, nothing is stored, and the next batch's signatures are its own."""
    from tombstones.errors import TombstoneError

    key = SigningKey.objects.get(pk=tombstone_make(tenant).key_id)
    refused = _requests(tenant, BATCH)
    refused[-3].statement["execution"]["records"][0]["content"] = "alice@example.org"
    with pytest.raises(TombstoneError) as refusal:
        _issue(refused)
    assert refusal.value.code == "statement_invalid"
    assert issue_service._signing.pending == 0 and not issue_service._signing_lock.locked()
    assert not Tombstone.objects.filter(pk__in=[r.tombstone_id for r in refused]).exists()
    requests = _requests(tenant, BATCH)
    _issue(requests)
    _assert_signed_as_here(requests, key)


def test_pipes_numbered_past_1024_work(tmp_path):
    """A server process can have many descriptors open: the pipes then get numbers select() cannot take."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this machine allows {hard} descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200) if hard == resource.RLIM_INFINITY
                                                else min(max(soft, 1200), hard), hard))
    base = os.open(tmp_path / "filler", os.O_CREAT | os.O_RDONLY)
    held = []
    try:
        while not held or held[-1] < 1100:
            held.append(os.dup(base))
        private = Ed25519PrivateKey.generate()
        process = _keyed(private)
        try:
            assert min(process._in, process._out) > 1024
            messages = _messages(100)
            process.submit(messages, [leaf_hash(m) for m in messages])
            assert process.take(100) == [private.sign(m) for m in messages]
        finally:
            process.close()
    finally:
        for fd in held + [base]:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_forked_child_starts_without_its_parents_process_or_lock(tenant):
    """A prefork worker's child must not write into its parent's pipes, nor wait for a lock that a thread of
    the parent held at the fork."""
    tombstone_make(tenant)
    _issue(_requests(tenant, BATCH))
    assert issue_service._signing is not None
    assert issue_service._signing_lock.acquire(blocking=False)  # held at the fork
    try:
        pid = os.fork()
        if pid == 0:  # the child: only look, then leave without running any cleanup of the parent's
            fresh = issue_service._signing is None and not issue_service._signing_lock.locked()
            os._exit(0 if fresh else 1)
        _, status = os.waitpid(pid, 0)
    finally:
        issue_service._signing_lock.release()
    assert os.waitstatus_to_exitcode(status) == 0
    assert issue_service._signing is not None and issue_service._signing.process.poll() is None
