"""An advisory per-model file lock so two pulls (or a pull and an ``rm``) never interleave.

``flock`` is released by the kernel when the holder dies, so a killed pull never leaves a stale
lock behind. A second pull waits for the first and then finds the model already verified.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["model_lock"]

try:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

except ImportError:  # pragma: no cover - Windows
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False

    def _unlock(fd: int) -> None:
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)


@contextlib.contextmanager
def model_lock(
    lock_file: Path,
    on_wait: Callable[[], None] | None = None,
    poll: float = 0.2,
) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_file``; call ``on_wait()`` once if someone else has it."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        waited = False
        while not _try_lock(fd):
            if not waited and on_wait is not None:
                on_wait()
            waited = True
            time.sleep(poll)
        try:
            yield
        finally:
            _unlock(fd)
    finally:
        os.close(fd)
