from __future__ import annotations

import threading
import time
from pathlib import Path

from fimble.models.locking import model_lock


def test_second_holder_waits_and_is_told(tmp_path: Path) -> None:
    lock = tmp_path / "locks" / "m.lock"
    order: list[str] = []
    waited = threading.Event()
    inside = threading.Event()

    def second() -> None:
        with model_lock(lock, on_wait=waited.set, poll=0.01):
            order.append("second")

    with model_lock(lock):
        t = threading.Thread(target=second)
        t.start()
        assert waited.wait(5)
        time.sleep(0.05)
        order.append("first")
        inside.set()
    t.join(5)
    assert order == ["first", "second"]
