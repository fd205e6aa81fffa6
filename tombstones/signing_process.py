"""A signing process beside this one, for batches of tombstones (pure: no Django).

Signing is the largest single part of issuing a batch (~35 µs a tombstone, about half the batch's time), and
the rest of the work (checks, canonical bytes, storing, the log) is Python that holds this process's one
interpreter lock. A thread cannot sign beside it: `cryptography` releases the lock while it signs, but the
thread gets it back only at the interpreter's switch interval (5 ms) after each signature (measured:
slower than signing in line). A process of its own signs on the other core while this one goes on; the
signatures are the same bytes (Ed25519 is deterministic: RFC 8032), made by the same library.

    parent                                     child (`python -m tombstones.signing_process`)
    b"K" + the raw private key (32 bytes)  ->  answers the raw public key (32 bytes)
    b"S" + messages, each its length first ->  answers, per message, its signature (64 bytes) and the first
                                                8 bytes of its RFC 6962 leaf hash (SHA-256 of 0x00 || message)

Frames are a kind byte and a 4-byte big-endian length, then the body. The parent checks each answer's leaf
hash prefix against the leaf it computed itself (an answer that belongs to another message is caught) and
the public key against the key it asked for, and verifies one signature of each batch. The key travels
only over the pipe between the two processes (never at rest, never in an argument or the environment).

The child exits when its input ends: when the parent closes it, or dies (the pipe's last writer is gone).
"""
from __future__ import annotations

import os
import select
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from .merkle import leaf_hash  # pure, as this module is

HEADER = struct.Struct(">cI")
LENGTH = struct.Struct(">I")
SIGNATURE_BYTES = 64
CHECK_BYTES = 8
ANSWER_BYTES = SIGNATURE_BYTES + CHECK_BYTES
PUBLIC_KEY_BYTES = 32
PIPE_BYTES = 1 << 20  # asked of Linux for both pipes (F_SETPIPE_SZ): a batch's messages fit, writes rarely wait
START_SECONDS = 10.0  # for the child to answer its key: it imports `cryptography`, ~0.1 s
ANSWER_SECONDS = 30.0  # for the next answer, once asked: a frame of messages takes milliseconds
ROOT = Path(__file__).resolve().parents[1]


class SigningProcessError(RuntimeError):
    """The signing process failed, died or answered wrongly: sign in this process instead."""


def serve() -> None:
    """The child: sign what comes in, in order, until the input ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is for the parent, which closes us
    reader, writer = sys.stdin.buffer, sys.stdout.buffer
    sign = None
    while True:
        header = reader.read(HEADER.size)
        if len(header) < HEADER.size:
            return
        kind, length = HEADER.unpack(header)
        body = reader.read(length)
        if len(body) < length:
            return
        if kind == b"K":
            private = Ed25519PrivateKey.from_private_bytes(body)
            sign = private.sign
            writer.write(private.public_key().public_bytes_raw())
        elif kind == b"S" and sign is not None:
            answers, offset, unpack = bytearray(), 0, LENGTH.unpack_from
            while offset < length:
                (size,) = unpack(body, offset)
                message = body[offset + 4:offset + 4 + size]
                offset += 4 + size
                answers += sign(message)
                answers += leaf_hash(message)[:CHECK_BYTES]
            writer.write(answers)
        else:
            return  # not our protocol: stop, and the parent sees the pipe close
        writer.flush()


def _poll(events: dict[int, int], seconds: float) -> set[int]:
    """The descriptors among `events` that are ready (or closed: a hang-up reads as end of file), waiting
    `seconds` at most. poll, not select: a server process's descriptors can be numbered past select's 1,024."""
    poller = select.poll()
    for fd, mask in events.items():
        poller.register(fd, mask)
    return {fd for fd, _mask in poller.poll(seconds * 1000)}


def _pipe_enlarge(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (ImportError, OSError):  # not Linux, or over the system's limit: the default size works, waits more
        pass


class SigningProcess:
    """The parent's handle on one child. `key(raw, public)` sets the key it signs with; `submit(messages,
    leaves)` sends messages, `take(n)` blocks until n more answers have come (checked) and returns their
    signatures; `pending` counts the answers not yet taken. Any failure raises `SigningProcessError` and
    leaves the handle closed."""

    def __init__(self):
        self.pid_owner = os.getpid()
        self.process = subprocess.Popen([sys.executable, "-m", "tombstones.signing_process"], cwd=ROOT,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self._in, self._out = self.process.stdin.fileno(), self.process.stdout.fileno()
        for fd in (self._in, self._out):
            _pipe_enlarge(fd)
            os.set_blocking(fd, False)
        self._received = bytearray()
        self._leaves: list[bytes] = []  # the expected leaf of each answer not yet taken, in order
        self.public_key: bytes | None = None

    @property
    def pending(self) -> int:
        return len(self._leaves)

    def key(self, raw: bytes, public: bytes) -> None:
        if self.public_key == public:
            return
        self._write(HEADER.pack(b"K", len(raw)) + raw)
        self._wait_for(PUBLIC_KEY_BYTES, START_SECONDS, "did not answer its key")
        answered = bytes(self._received[:PUBLIC_KEY_BYTES])
        del self._received[:PUBLIC_KEY_BYTES]
        if answered != public:
            self._fail("answered another public key")
        self.public_key = public

    def submit(self, messages: list[bytes], leaves: list[bytes]) -> None:
        pack = LENGTH.pack
        body = b"".join(pack(len(message)) + message for message in messages)
        self._leaves += leaves
        self._write(HEADER.pack(b"S", len(body)) + body)

    def take(self, count: int) -> list[bytes]:
        """The next `count` signatures, in submission order (waits for them)."""
        if count > len(self._leaves):
            raise ValueError("more signatures asked for than messages submitted")
        needed = count * ANSWER_BYTES
        self._wait_for(needed, ANSWER_SECONDS, "did not answer its messages")
        answers, self._received = self._received[:needed], self._received[needed:]
        leaves, self._leaves = self._leaves[:count], self._leaves[count:]
        signatures = []
        for index, leaf in enumerate(leaves):
            start = index * ANSWER_BYTES
            if answers[start + SIGNATURE_BYTES:start + ANSWER_BYTES] != leaf[:CHECK_BYTES]:
                self._fail("answered a signature for another message")
            signatures.append(bytes(answers[start:start + SIGNATURE_BYTES]))
        return signatures

    def available(self) -> int:
        """Answers that have come and can be taken without waiting (reads what the pipe holds)."""
        self._read(wait=0.0)
        return min(len(self._received) // ANSWER_BYTES, len(self._leaves))

    def close(self) -> None:
        """Stop the child: it exits when its input ends."""
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _fail(self, why: str):
        self.close()
        raise SigningProcessError(f"signing process {self.process.pid}: {why}")

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._in, view):]
            except BlockingIOError:  # its input is full: it may be waiting for us to read its answers
                ready = _poll({self._out: select.POLLIN, self._in: select.POLLOUT}, START_SECONDS)
                if self._out in ready:
                    self._read(wait=0.0)
                elif self._in not in ready:
                    self._fail("stopped reading")
            except OSError as exc:  # a broken pipe among them
                self._fail(f"its input closed ({exc})")

    def _wait_for(self, size: int, seconds: float, why: str) -> None:
        deadline = time.monotonic() + seconds
        while len(self._received) < size:
            left = deadline - time.monotonic()
            if left <= 0:
                self._fail(f"{why} within {seconds:g} s")
            self._read(wait=left)

    def _read(self, wait: float) -> None:
        """Read what has come; `wait` seconds at most for something to come."""
        if wait > 0.0 and not _poll({self._out: select.POLLIN}, wait):
            return
        while True:
            try:
                data = os.read(self._out, PIPE_BYTES)
            except BlockingIOError:
                return
            except OSError as exc:
                self._fail(f"its output failed ({exc})")
            if not data:
                self._fail(f"exited (code {self.process.poll()})")
            self._received += data
            if len(data) < PIPE_BYTES:
                return


if __name__ == "__main__":
    try:
        serve()
    except BrokenPipeError:  # the parent stopped reading (it closed us, or died): nothing left to answer
        pass
