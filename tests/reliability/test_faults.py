"""Faults: SIGKILL mid-write, a full disk, a model file that changes under a running server.

A few rounds of each kill here (``make faults`` runs ``bench/faults.py``: twenty each, indexing
included, JSON under ``bench/results/``). Indexing under SIGKILL is ``tests/indexer/test_crash.py``;
a pool worker killed while sending, ``tests/indexer/test_build.py``.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from fimble.completion.cache import CacheConfig, Cached, CompletionCache
from fimble.completion.engine.kvstore import KVStore
from tests.reliability.faults import batch_round, cache_round, kvstate_round

ROUNDS = 3


@pytest.mark.slow
def test_sigkill_while_saving_kv_states(tmp_path: Path) -> None:
    rng = random.Random(23)
    rounds = [kvstate_round(tmp_path / "kv", rng) for _ in range(ROUNDS)]
    assert [r.problems for r in rounds] == [[]] * ROUNDS
    assert sum(r.written for r in rounds) > 0  # the kills landed while states were being written


@pytest.mark.slow
def test_sigkill_while_writing_the_completion_cache(tmp_path: Path) -> None:
    rng = random.Random(24)
    rounds = [cache_round(tmp_path / "cache", rng, start=n * 1_000_000) for n in range(ROUNDS)]
    assert [r.problems for r in rounds] == [[]] * ROUNDS
    assert sum(r.written for r in rounds) > 0


@pytest.mark.slow
def test_sigkill_during_a_batch_run(tmp_path: Path) -> None:
    rng = random.Random(25)
    rounds = [batch_round(tmp_path / f"out{n}.jsonl", rng) for n in range(ROUNDS)]
    assert [r.problems for r in rounds] == [[]] * ROUNDS
    assert sum(r.written for r in rounds) > 0  # the kills landed after some groups were done


def _mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    mount = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)]
    done = subprocess.run(mount, capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {done.stderr.decode().strip()}")


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MiB filesystem (tmpfs; root only), unmounted afterwards."""
    where = tmp_path / "small"
    _mount_tmpfs(where, "2m")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_disk_loses_nothing_stored_and_raises_nothing(full_disk: Path) -> None:
    """Fill a real filesystem with KV states and cache entries: writes past the end fail quietly
    (counted, logged), everything written before reads back after a reopen, nothing raises."""
    store = KVStore(full_disk / "kv", max_bytes=1 << 30)
    rng = np.random.default_rng(5)
    kept = []
    for i in range(40):  # 40 x 128 KiB: far past 2 MiB
        tokens = np.arange(i * 1000, i * 1000 + 100, dtype=np.int32)
        blob = rng.integers(0, 255, size=128 << 10, dtype=np.uint8).tobytes()
        if store.save(tokens, blob) is not None:
            kept.append((tokens, blob))
    assert kept and store.errors > 0
    cache = CompletionCache(CacheConfig(path=full_disk / "cache", disk_mb=64))
    for i in range(3000):
        cache.put(f"k{i}".encode(), Cached("v" * 400, False))
    cache.flush()
    assert cache.get(b"k2999") is not None  # memory still serves
    cache.close()
    store.close()
    reopened = KVStore(full_disk / "kv", max_bytes=1 << 30)
    for tokens, blob in kept:
        match = reopened.match(tokens)
        assert match is not None and match[1] == len(tokens)
        assert bytes(reopened.read(match[0]) or b"") == blob
    again = CompletionCache(CacheConfig(path=full_disk / "cache", disk_mb=64))
    assert again.stats().disk_state in ("open", "failed")  # full from the start: memory only is fine
    again.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.model
def test_the_server_outlives_a_full_disk_and_its_model_file_changing(tmp_path: Path) -> None:
    """One server (HTTP, the 0.5B model copied beside the test) whose FIMBLE_HOME is a 3 MiB
    filesystem: it fills up with saved KV states; then its model file is replaced, truncated
    (a memory-mapped model died of SIGBUS here) and deleted. Every completion is answered."""
    from tests.server.lsp.conftest import env, model_path

    model = tmp_path / "model.gguf"
    shutil.copyfile(model_path(), model)
    home = tmp_path / "home"
    _mount_tmpfs(home, "3m")
    port = _free_port()
    log = tmp_path / "server.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fimble", "serve", "--no-lsp", "--http", f"127.0.0.1:{port}",
             "-m", str(model)],
            # (plain: the CPU path of the copy is not probed again; every weight in plain buffers)
            env=env(home, FIMBLE_CPU_PATH="plain"), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=err,
        )  # fmt: skip
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300) as client:
            deadline = time.monotonic() + 900
            while time.monotonic() < deadline:
                try:
                    if client.get("/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.5)

            def complete(name: str) -> None:
                prefix = "".join(f"def {name}_{i}(a, b):\n    return a + b + {i}\n\n" for i in range(12))
                answer = client.post("/infill", json={
                    "input_prefix": prefix + f"def {name}(a, b):\n    return ", "input_suffix": "\n",
                    "n_predict": 6, "cache_prompt": True,
                })  # fmt: skip
                assert answer.status_code == 200, answer.text
                assert proc.poll() is None, log.read_text()

            for name in ("add", "mul", "sub", "div"):  # different files: states to save, until full
                complete(name)
            replacement = tmp_path / "other.gguf"
            replacement.write_bytes(b"GGUF" + b"\0" * 4096)
            os.replace(replacement, model)
            complete("after_replace")
            os.truncate(model, 1000)
            complete("after_truncate")
            model.unlink()
            complete("after_delete")
    finally:
        proc.terminate()
        proc.wait(60)
        subprocess.run(["umount", "-l", str(home)], check=False)
    assert proc.returncode in (0, -15, 143), log.read_text()
