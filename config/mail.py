"""The development mail backend: each mail a file, one log line.

`FileEmailBackend` writes every message as an RFC 5322 `.eml` file (attachments included, as sent) under
`EMAIL_FILE_PATH` ($LEDGER_VAR_DIR/mail by default) and logs one INFO line per mail: recipients, subject and
the file. Django's console backend printed the whole message, a receipt's base64 included, to stdout, which a
Celery worker logs line by line as WARNINGs (~170 per notice). Production sends through SMTP instead
(`EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend`, `EMAIL_HOST`, ...: config/settings.py).

The files hold what the subject was sent, their receipt's salts included: they are for a developer's machine,
readable by the service's user only.
"""
from __future__ import annotations

import logging
import os
import threading
import uuid
from datetime import datetime, timezone
from pathlib import Path

from django.conf import settings
from django.core.mail.backends.base import BaseEmailBackend

logger = logging.getLogger(__name__)


class FileEmailBackend(BaseEmailBackend):
    def __init__(self, *args, file_path: str | os.PathLike | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.directory = Path(file_path or getattr(settings, "EMAIL_FILE_PATH", None)
                              or Path(settings.VAR_DIR) / "mail")
        self._lock = threading.Lock()

    def send_messages(self, email_messages) -> int:
        sent = 0
        with self._lock:
            for message in email_messages or ():
                if not message.recipients():
                    continue
                try:
                    path = self._write(message.message().as_bytes(linesep="\n"))
                except OSError:
                    if not self.fail_silently:
                        raise
                    continue
                logger.info("mail to %s: %r saved as %s", ", ".join(message.recipients()), message.subject, path)
                sent += 1
        return sent

    def _write(self, data: bytes) -> Path:
        """The message in a file of its own, whole or not at all (written aside, then renamed)."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        name = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S.%fZ}-{uuid.uuid4().hex[:12]}.eml"
        path, partial = self.directory / name, self.directory / f".{name}.partial"
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(partial, path)
        return path
