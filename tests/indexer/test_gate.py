"""Gate: completions pause background indexing."""

from __future__ import annotations

import threading
import time

from fimble.indexer.gate import Gate


def test_busy_blocks_until_all_completions_end() -> None:
    gate = Gate()
    assert gate.idle and gate.wait_idle()
    released = threading.Event()

    def waiter() -> None:
        gate.wait_idle()
        released.set()

    with gate.busy():
        gate.enter()  # nested / concurrent completions
        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(0.1)
        assert not released.is_set() and not gate.idle
        gate.exit()
        time.sleep(0.1)
        assert not released.is_set()
    thread.join(5)
    assert released.is_set() and gate.idle


def test_pause_and_stop() -> None:
    gate = Gate()
    gate.pause()
    stop = threading.Event()
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(gate.wait_idle(stop)))
    thread.start()
    time.sleep(0.1)
    stop.set()
    thread.join(5)
    assert result == [False] and gate.paused
    gate.resume()
    assert gate.wait_idle()
