"""One writer per workspace index across processes: an advisory lock on a file in the store directory.

LMDB would serialise two writers itself, but the second one would then block on the first one's
transactions indefinitely; fimble instead tells the user at once which process holds the index. The OS
drops the lock when its holder dies, even by SIGKILL, so it can never go stale.
"""

from __future__ import annotations

import os
from pathlib import Path

from fimble.errors import IndexLocked

__all__ = ["WriterLock"]

if os.name == "nt":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


class WriterLock:
    """Held by the process whose writer thread updates the index; others may still read."""

    def __init__(self, path: Path, root: str) -> None:
        self.path = path
        self.root = root
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        if not _try_lock(fd):
            try:
                os.lseek(fd, 0, os.SEEK_SET)
                holder = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
            finally:
                os.close(fd)
            raise IndexLocked(
                f"the index of {self.root} is being updated by another fimble process (pid {holder}); "
                "stop that process or wait for it, then retry"
            )
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                _unlock(fd)
            finally:
                os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None
