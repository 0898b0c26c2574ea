"""A pool task for tests: the first worker to claim ``DIE_ONCE`` (a file beside the workspace) dies
*while sending* its result, the one death CPython's ``ProcessPoolExecutor`` does not notice: it
writes the header of a result message and a few bytes of it, holding the result pipe's lock, and
SIGKILLs itself. Every other call is the real ``analyze_group``. (A module of its own: pool workers
import it by name.)"""

from __future__ import annotations

import os
import signal
import struct
import sys
from pathlib import Path

from fimble.indexer.worker import Result, Task, analyze_group

__all__ = ["die_once_while_sending"]


def _claim(tasks: list[Task]) -> bool:
    for parent in Path(tasks[0].path).parents:
        try:
            (parent / "DIE_ONCE").unlink()
            return True
        except FileNotFoundError:
            continue
    return False


def die_once_while_sending(tasks: list[Task]) -> list[Result]:
    if not _claim(tasks):
        return analyze_group(tasks)
    frame = sys._getframe()
    while frame.f_code.co_name != "_process_worker":  # the pool's worker loop holds the result queue
        frame = frame.f_back
    results = frame.f_locals["result_queue"]
    if results._wlock is not None:
        results._wlock.acquire()
    results._writer._send(struct.pack("!i", 1 << 20) + b"\x80\x04" + b"x" * 64)  # 70 of 1 MiB + 4
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable")
